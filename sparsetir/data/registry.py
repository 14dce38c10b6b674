"""Registry of the real datasets: where each file lives, its checksum, and how to parse it.

Every entry names its files by a relative path, the same under each folder searched (laid out
like ``shared/data``), with the sha256 copied from that folder's ``provenance.txt`` and the
canonical URL the file came from. :func:`load` finds the files, verifies them and parses them.

Files are resolved in order (see :mod:`sparsetir.data.resolve`): the repository's embedded
``data/`` folder (``data/EMBEDDED.md`` lists what is there), the download cache, the mirror
(``$SPARSETIR_DATA_MIRROR``), and then a download from the canonical URL into the cache. The paper's large graphs (``source="download"``)
are not in the mirror; their digests cannot be known here, so they are recorded as
``sha256=None`` (*unverified*) and pinned in the cache on first download. Their shapes are
``None`` too: nothing here has seen them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .gnn_benchmark_npz import read_gnn_benchmark_npz
from .graphdata_npz import read_graphdata_npz
from .kitti_bin import read_kitti_bin
from .matrix_market import read_matrix_market
from .networkx_json import read_node_link_splits
from .ntriples import read_ntriples, read_ntriples_member
from .ogb_archive import read_ogb_edge_archive, read_ogb_knowledge_graph
from .planetoid import read_planetoid_graph
from .rdf_graph import RelationalGraph
from .resolve import DatasetUnavailableError, locate, search_dirs
from .scipy_npz import read_scipy_npz_member
from .smtx import read_smtx
from .snap_edge_list import read_edge_list
from .symmetrize import symmetrize

__all__ = [
    "BENCHMARK_MIN_NNZ",
    "KINDS",
    "PAPER_GNN_GRAPHS",
    "PAPER_RGCN_GRAPHS",
    "DataFile",
    "DatasetEntry",
    "DatasetUnavailableError",
    "benchmark_graphs",
    "clear_caches",
    "entry",
    "graphs",
    "load",
    "load_relational",
    "matrices",
    "names",
    "point_clouds",
    "relational_graphs",
    "search_dirs",
]

#: Graphs with at least this many stored entries (after symmetrising) are benchmark graphs.
BENCHMARK_MIN_NNZ = 50_000
#: What ``load`` returns per kind: graph/matrix/rdf a canonical CSR matrix (rdf: all relations
#: merged), pointcloud an ``(N, 4)`` float32 array.
KINDS = ("graph", "matrix", "rdf", "pointcloud")
#: The SparseTIR paper's GNN graphs (SpMM, SDDMM) and R-GCN graphs, in the paper's order.
PAPER_GNN_GRAPHS = ("cora", "citeseer", "pubmed", "ppi", "ogbn-arxiv", "ogbn-proteins", "reddit")
PAPER_RGCN_GRAPHS = ("aifb", "mutag", "bgs", "am", "ogbl-biokg")


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset: relative path, sha256 (``None``: unverified), size and canonical URL."""

    relpath: str
    sha256: str | None
    size: int | None = None
    url: str | None = None


@dataclass(frozen=True)
class DatasetEntry:
    """A registered dataset; ``shape`` and ``nnz`` (``None``: not known here) describe what :func:`load` returns."""

    name: str
    files: tuple[DataFile, ...]
    parser: Callable[..., object]
    kind: str  # one of KINDS
    symmetrize: bool
    shape: tuple[int, int] | None
    nnz: int | None
    description: str
    source: str = "mirror"  # "mirror": in shared/data; "download": only from its canonical URL

    @property
    def verified(self) -> bool:
        """Whether every file has a recorded sha256."""
        return all(file.sha256 is not None for file in self.files)


def _github(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


_NETWORKIT = "networkit/networkit"
_LAGRAPH, _LAGRAPH_COMMIT = "GraphBLAS/LAGraph", "afeb9dffca463fb966f1d9637986af55b04df461"
_GRAPHDATA, _GRAPHDATA_COMMIT = "EdisonLeeeee/GraphData", "f8022c26b917346f2a461ffec0ec5ae24b36de68"
_DLMC, _DLMC_COMMIT = "CX9898/dlmc-dataset", "9e9a9d89fdbf44798f2dfac30eda9b144c4279a8"


def _planetoid(name: str, sha256: str, shape, nnz: int, description: str) -> DatasetEntry:
    relpath = f"planetoid/ind.{name}.graph"
    url = f"https://raw.githubusercontent.com/kimiyoung/planetoid/master/data/ind.{name}.graph"
    return DatasetEntry(
        name, (DataFile(relpath, sha256, None, url),), read_planetoid_graph, "graph", True, shape, nnz, description
    )


def _graphdata(name: str, sha256: str, size: int, shape, nnz: int, description: str) -> DatasetEntry:
    url = _github(_GRAPHDATA, _GRAPHDATA_COMMIT, f"datasets/{name}.npz")
    file = DataFile(f"graphdata-npz/{name}.npz", sha256, size, url)
    return DatasetEntry(name, (file,), read_graphdata_npz, "graph", True, shape, nnz, description)


def _snap(name, relpath, sha256, size, commit, symmetric, shape, nnz, description) -> DatasetEntry:
    url = _github(_NETWORKIT, commit, "input/" + relpath.split("/", 1)[1])
    return DatasetEntry(
        name, (DataFile(relpath, sha256, size, url),), read_edge_list, "graph", symmetric, shape, nnz, description
    )


def _suitesparse(name, sha256, size, kind, shape, nnz, description) -> DatasetEntry:
    url = _github(_LAGRAPH, _LAGRAPH_COMMIT, f"data/{name}.mtx")
    file = DataFile(f"suitesparse-lagraph/{name}.mtx", sha256, size, url)
    return DatasetEntry(name, (file,), read_matrix_market, kind, kind == "graph", shape, nnz, description)


_DLMC_LAYERS = {
    "transformer": {
        "ffn_conv1": "body_encoder_layer_0_ffn_conv1_fully_connected",
        "ffn_conv2": "body_encoder_layer_0_ffn_conv2_fully_connected",
        "attention_q": "body_encoder_layer_0_self_attention_multihead_attention_q_fully_connected",
    },
    "rn50": {
        "initial_conv": "initial_conv",
        "bottleneck_2_group1": "bottleneck_2_block_group1_1_1",
        "bottleneck_2_group3": "bottleneck_2_block_group3_1_1",
        "bottleneck_3_group3": "bottleneck_3_block_group3_1_1",
        "projection_group2": "bottleneck_projection_block_group_projection_block_group2",
        "final_dense": "final_dense",
    },
}
_DLMC_MODELS = {"transformer": "Transformer", "rn50": "ResNet-50"}


def _dlmc(model, sparsity, layer, shape, nnz, size, sha256) -> DatasetEntry:
    """DLMC matrices are named ``dlmc/<model>/magnitude/<sparsity>/<layer>``."""
    path = f"{model}/magnitude_pruning/{sparsity}/{_DLMC_LAYERS[model][layer]}.smtx"
    file = DataFile("dlmc/" + path, sha256, size, _github(_DLMC, _DLMC_COMMIT, path))
    description = f"DLMC {_DLMC_MODELS[model]} weight mask {layer}, magnitude pruning to {sparsity} sparsity"
    return DatasetEntry(
        f"dlmc/{model}/magnitude/{sparsity}/{layer}", (file,), read_smtx, "matrix", False, shape, nnz, description
    )


# sha256 digests and sizes are copied from shared/data/<folder>/provenance.txt.
_ENTRIES: tuple[DatasetEntry, ...] = (
    _planetoid("cora", "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d", (2708, 2708), 10556,
               "Cora citation graph (Planetoid adjacency lists)"),
    _planetoid("citeseer", "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7", (3327, 3327), 9228,
               "Citeseer citation graph (Planetoid adjacency lists; keeps its 124 self-loops)"),
    _planetoid("pubmed", "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9", (19717, 19717), 88651,
               "Pubmed citation graph (Planetoid adjacency lists)"),
    DatasetEntry(
        "cora_ml",
        (
            DataFile(
                "gnn-benchmark-npz/cora_ml.npz",
                "e3439bfd32c4a962d5c56a4f313793baee39181c208c90a3915b61183d3e1cda",
                1622234,
                _github("klicperajo/ppnp", "394425a9eeffbd95c09d68d6f0e1473ac9c2fd4a", "ppnp/data/cora_ml.npz"),
            ),
        ),
        read_gnn_benchmark_npz, "graph", True, (2995, 2995), 16316,
        "Cora-ML citation graph (gnn-benchmark npz from PPNP), symmetrised",
    ),
    _graphdata("amazon_cs", "a6942db609f196b53503d91b99a02ad8d052d5d9be8ef41db976fb65f66ed1f3", 3410531,
               (13752, 13752), 491722, "Amazon Computers co-purchase graph (GraphData npz), symmetrised"),
    _graphdata("amazon_photo", "bdb98b54cd3125bfa69b23ba0aae84fabcb770c6727175b8f6eb1d64f3be4b2b", 1772672,
               (7650, 7650), 238163, "Amazon Photo co-purchase graph (GraphData npz), symmetrised"),
    _graphdata("coauthor_cs", "7b7b51bf270d341f1c4231834c58a526bb04db003fd76a6d2f51ad7d252005ed", 2800548,
               (18333, 18333), 163788, "Coauthor CS co-authorship graph (GraphData npz)"),
    _graphdata("dblp", "e1c460c864735b88158e230e715715b08a8f7bb7c94f7f6c3b5efc412558877d", 727093,
               (17716, 17716), 105734, "DBLP citation graph (GraphData npz)"),
    _snap("wiki-vote", "snap-wiki-Vote/wiki-Vote.txt",
          "d2afbedf262126f820c6b3dd9f39a6d68e6f5ea839c0508297032ca77578b28a", 1095061,
          "17427915b5b8d39fdd602e5247cd96bb8138d79c", False, (7115, 7115), 103689,
          "SNAP wiki-Vote: directed Wikipedia adminship votes, ids relabelled to 0..n-1"),
    _snap("p2p-gnutella05", "snap-p2p-Gnutella/p2p-Gnutella05.txt",
          "a209bbe775782af977a5320d41f834e10f051b6654333ba7e648d2bee422c26e", 305754,
          "577df55ac6cd486f6d61044f4e6bf262febb24d3", False, (8846, 8846), 31839,
          "SNAP p2p-Gnutella05: directed Gnutella peer-to-peer network, August 5 2002"),
    _snap("p2p-gnutella06", "snap-p2p-Gnutella/p2p-Gnutella06.txt",
          "08a6be6b37c79d111b14c7c65883304e48a12feb0f56e573038be0faa5e6ada4", 301712,
          "577df55ac6cd486f6d61044f4e6bf262febb24d3", False, (8717, 8717), 31525,
          "SNAP p2p-Gnutella06: directed Gnutella peer-to-peer network, August 6 2002"),
    _snap("ego-facebook", "snap-ego-facebook/facebook",
          "f41c026ed8af3cc3359f1ca5573d0605fb09ae0eefa34544b820fd8c6e2ef296", 854362,
          "1aff2883e36b6d8bf4d19d2dc22b8cc7ed5c3e7a", True, (4039, 4039), 176468,
          "SNAP ego-Facebook (facebook_combined): undirected, each edge listed once, symmetrised"),
    _snap("ca-condmat", "snap-ca-CondMat/CA-CondMat_tab-sep.edgelist",
          "bb61d14cc6186789566dc81f92e3979261adeab3e2b0f15a77805e498bb0bc4a", 2419935,
          "cf0fcde85e6626758a49b68750ff31167072db78", True, (23133, 23133), 186936,
          "SNAP ca-CondMat: undirected arXiv cond-mat co-authorship, ids relabelled to 0..n-1"),
    _suitesparse("bcsstk13", "cd0794b0ac36c44f53f0e93a5a740faaa1044eab7e3db63fe15c559caae22c9e", 1025924,
                 "matrix", (2003, 2003), 83883, "SuiteSparse HB/bcsstk13: fluid-flow stiffness (real symmetric)"),
    _suitesparse("cryg2500", "17e7aae931e9ee9d55c4699e2790e83627263c89a89ce6ce550d6dcd28466d79", 342097,
                 "matrix", (2500, 2500), 12349, "SuiteSparse Bai/cryg2500: crystal growth eigenmodes (real)"),
    _suitesparse("zenios", "c097cff8819212fff36fa738a8cd72dd9ceee977f3e07c24b18848fea30e6f31", 173782,
                 "matrix", (2873, 2873), 27191, "SuiteSparse HB/zenios: air-traffic control model (real symmetric)"),
    _suitesparse("olm1000", "d814ec8934fa86af5cba802630fb3d966e631a0c70339435638083ab80117da0", 69123,
                 "matrix", (1000, 1000), 3996, "SuiteSparse Bai/olm1000: Olmstead flow model (real)"),
    _suitesparse("jagmesh7", "cdcd561da557ad706e645d5314c6b512db1269461f88805c02cc13340225757f", 35154,
                 "matrix", (1138, 1138), 7450, "SuiteSparse HB/jagmesh7: 3-hole mesh problem (pattern symmetric)"),
    _suitesparse("west0067", "26e848564e3a0024ade49caba8c293c8b93ac81a34a2dba99e8b0b9f7bdd96d7", 4267,
                 "matrix", (67, 67), 294, "SuiteSparse HB/west0067: Cavett chemical process problem (real)"),
    _suitesparse("karate", "074a23e758ebeddb766fb08f617ee4bc5debc8d2564287c3e1e24f5ccdb77813", 1651,
                 "graph", (34, 34), 156, "SuiteSparse Newman/karate: Zachary karate club network (pattern symmetric)"),
    _suitesparse("pushpull", "1ac1847a923af0fbfb56f21a1287600019ce9d78cfc6b4287ea728285ca6be94", 886595,
                 "matrix", (4000, 4000), 196305, "LAGraph test matrix pushpull (pattern symmetric, origin unclear)"),
    _dlmc("transformer", "0.5", "ffn_conv1", (2048, 512), 524288, 1947017,
          "ef20afc46b3f21179717fcb6aa5638c23e9cfc06ff3d84a97a02104735fc7dc0"),
    _dlmc("transformer", "0.5", "ffn_conv2", (512, 2048), 524288, 2339893,
          "703876fd0dafa341b3498a884023319b52bde89114160e21e3af133c80c39888"),
    _dlmc("transformer", "0.5", "attention_q", (512, 512), 131072, 486181,
          "5f0f3c7c890e2d1cf763f5874b117efbc9d28971214b00d6e8687b80b9bf5e69"),
    _dlmc("transformer", "0.7", "ffn_conv1", (2048, 512), 314572, 1154601,
          "4942239bcc1c87d06cd49ecf7b97112609d3c877e1a51ebab5e60b464688f705"),
    _dlmc("transformer", "0.7", "ffn_conv2", (512, 2048), 314572, 1405467,
          "44376817d27e4efae4a81775cde4cca4d1aa7e8a56505937ddb0e88776341975"),
    _dlmc("transformer", "0.7", "attention_q", (512, 512), 78643, 288257,
          "0d5aff27216ea85af97133b169ffd685263092e520a5fbb277cb5404349bad79"),
    _dlmc("transformer", "0.9", "ffn_conv1", (2048, 512), 104857, 411052,
          "1d5cfbfec39fc7a61146ccc6dbf68ffe0ad2cecea27f0e8dff5c6a8e65c1ee6a"),
    _dlmc("transformer", "0.9", "ffn_conv2", (512, 2048), 104857, 470076,
          "5b23ab2701ec85f32cb6d4e05052320ec8bc01ffeeeba0a9cf3b82ad299688ac"),
    _dlmc("transformer", "0.9", "attention_q", (512, 512), 26214, 98345,
          "8a7d638b39d1a643886b697676cbe3ac173cd0bdd19972ce6d6cc21758507f37"),
    _dlmc("transformer", "0.98", "ffn_conv1", (2048, 512), 20971, 90144,
          "8a06b25cf81be64435074d733a2c431dccefe3ab48cd6beb116a2d64543b8770"),
    _dlmc("transformer", "0.98", "ffn_conv2", (512, 2048), 20971, 96486,
          "684a2cd213994aee7109ee64785e5e5af247cd459a9376312a41e0bab7be616a"),
    _dlmc("transformer", "0.98", "attention_q", (512, 512), 5242, 20455,
          "30d2f301836464755347e2e0ad6c50efa3e03587cb5c2b0888a0d9c694ff75bd"),
    _dlmc("rn50", "0.9", "initial_conv", (64, 147), 940, 3345,
          "5ccba4124080e1605309eaf5a0cdf63c6e9144c822406c7f86a16a13602e1786"),
    _dlmc("rn50", "0.9", "bottleneck_2_group1", (64, 576), 3686, 14530,
          "2d1b7ca2fa9a51a073450e747782edd4cc5ec57477382f34c6ff652152fb8a81"),
    _dlmc("rn50", "0.9", "bottleneck_2_group3", (256, 2304), 58982, 268753,
          "ffda533b2c4460d5e0e156c9f016dbbfd998b1479522cfc6cd9a4425e5e036b3"),
    _dlmc("rn50", "0.9", "bottleneck_3_group3", (1024, 256), 26214, 99189,
          "14d8f7edd0dd78b03df6dd508b86966a280a309ce1a7ad3488a9908023d73382"),
    _dlmc("rn50", "0.9", "projection_group2", (512, 256), 13107, 49370,
          "1bf822891a0aa59ce20dc0bb1303a6aedb4411b5c13e1b07eb64d52c081111e0"),
    _dlmc("rn50", "0.9", "final_dense", (1000, 2048), 204800, 918339,
          "6cbe461c1efaddc1b8752abc77b66dbe13df330a4ad9a6b997cdca4367b23d77"),
)


def _download_only(name, relpath, url, parser, kind, symmetric, description) -> DatasetEntry:
    """A paper graph too large for the mirror: unverified (sha256 pinned on first download), shape unknown."""
    return DatasetEntry(name, (DataFile(relpath, None, None, url),), parser, kind, symmetric, None, None,
                        description + " (unverified: sha256 pinned in the cache on first download)", "download")


_LATENT_GCN, _LATENT_GCN_COMMIT = "alexanderdesouza/latent-GCN", "9a3b70966ae041f41105315ca4fc55e13af89681"
_KITTI, _KITTI_COMMIT = "kuixu/kitti_object_vis", "12ce0a2348f6e1405c502bf32e51d76d3a970396"


def _rgcn_mirror(name, sha256, size, shape, nnz, description) -> DatasetEntry:
    path = f"data/{name}/{name}_stripped.nt.gz"
    file = DataFile(f"rdf-{name}/{name}_stripped.nt.gz", sha256, size, _github(_LATENT_GCN, _LATENT_GCN_COMMIT, path))
    return DatasetEntry(name, (file,), read_ntriples, "rdf", False, shape, nnz, description)


def _kitti(scan, sha256, size) -> DatasetEntry:
    path = f"data/object/training/velodyne/{scan}.bin"
    file = DataFile(f"pointcloud-kitti-full/{scan}.bin", sha256, size, _github(_KITTI, _KITTI_COMMIT, path))
    return DatasetEntry(f"kitti-{scan}", (file,), read_kitti_bin, "pointcloud", False, (size // 16, 4), None,
                        f"KITTI velodyne scan {scan}: x, y, z, reflectance per point (float32)")


_PAPER_DOWNLOADS: tuple[DatasetEntry, ...] = (
    _download_only("ppi", "dgl/ppi.zip", "https://data.dgl.ai/dataset/ppi.zip", read_node_link_splits,
                   "graph", True, "PPI protein-protein interaction graphs (24 tissues, train+valid+test "
                   "stacked block-diagonally), DGL's ppi.zip, symmetrised"),
    _download_only("ogbn-arxiv", "ogb/arxiv.zip", "http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip",
                   functools.partial(read_ogb_edge_archive, name="arxiv"), "graph", True,
                   "OGB ogbn-arxiv citation graph, symmetrised"),
    _download_only("ogbn-proteins", "ogb/proteins.zip", "http://snap.stanford.edu/ogb/data/nodeproppred/proteins.zip",
                   functools.partial(read_ogb_edge_archive, name="proteins"), "graph", True,
                   "OGB ogbn-proteins protein association graph, symmetrised"),
    _download_only("reddit", "dgl/reddit.zip", "https://data.dgl.ai/dataset/reddit.zip",
                   functools.partial(read_scipy_npz_member, member="reddit_graph.npz"), "graph", False,
                   "Reddit post-to-post graph (GraphSAGE), reddit_graph.npz in DGL's reddit.zip"),
    _download_only("bgs", "rgcn/bgs.tgz", "https://data.dgl.ai/dataset/bgs.tgz",
                   functools.partial(read_ntriples_member, member="bgs_stripped.nt.gz"), "rdf", False,
                   "R-GCN BGS (British Geological Survey) entity graph, N-Triples"),
    _download_only("am", "rgcn/am.tgz", "https://data.dgl.ai/dataset/am.tgz",
                   functools.partial(read_ntriples_member, member="am_stripped.nt.gz"), "rdf", False,
                   "R-GCN AM (Amsterdam Museum) entity graph, N-Triples"),
    _download_only("ogbl-biokg", "ogb/biokg.zip", "http://snap.stanford.edu/ogb/data/linkproppred/biokg.zip",
                   functools.partial(read_ogb_knowledge_graph, name="biokg"), "rdf", False,
                   "OGB ogbl-biokg biomedical knowledge graph (5 entity types, 51 relations)"),
)

_MIRROR_EXTRAS: tuple[DatasetEntry, ...] = (
    _rgcn_mirror("aifb", "ba4191235456e09d8f12a2415f24273b8d7641ffee6001ca9340f02c04d77fea", 568040,
                 (8285, 8285), 28963, "R-GCN AIFB entity graph (29,043 triples, 45 relations), N-Triples"),
    _rgcn_mirror("mutag", "871f24a766fd377f0adf995f50aea70fd03e4997c6051b3abff3384c08e56ac7", 645053,
                 (23644, 23644), 73114, "R-GCN MUTAG entity graph (74,227 triples, 23 relations), N-Triples"),
    _kitti("000000", "0e09c85e3f6078ecbdd1e706ee9624519f1bd29417437167a9ed7fbe6f54b4b1", 1846144),
    _kitti("000001", "59a02fdaaab3b7e903713cb618e8f53efcaf71c144436ddfcdf4f28bdbd73d20", 1924288),
)

_ENTRIES = _ENTRIES + _MIRROR_EXTRAS + _PAPER_DOWNLOADS

_REGISTRY: dict[str, DatasetEntry] = {e.name: e for e in _ENTRIES}
if len(_REGISTRY) != len(_ENTRIES):
    raise RuntimeError("duplicate dataset names in the registry")


def names() -> list[str]:
    """All registered dataset names, in registry order."""
    return list(_REGISTRY)


def _of_kind(kind: str) -> list[str]:
    return [e.name for e in _ENTRIES if e.kind == kind]


def graphs() -> list[str]:
    """Names of the graph datasets (square adjacency matrices), mirror and download-only."""
    return _of_kind("graph")


def matrices() -> list[str]:
    """Names of the non-graph sparse matrices (SuiteSparse, DLMC)."""
    return _of_kind("matrix")


def relational_graphs() -> list[str]:
    """Names of the relational (R-GCN) graphs; :func:`load_relational` gives their typed edges."""
    return _of_kind("rdf")


def point_clouds() -> list[str]:
    """Names of the point clouds (KITTI scans)."""
    return _of_kind("pointcloud")


def benchmark_graphs() -> list[str]:
    """Mirror graphs with at least :data:`BENCHMARK_MIN_NNZ` non-zeros: the performance targets."""
    return [e.name for e in _ENTRIES
            if e.kind == "graph" and e.source == "mirror" and e.nnz is not None and e.nnz >= BENCHMARK_MIN_NNZ]


def entry(name: str) -> DatasetEntry:
    """The registry entry for ``name``; ``KeyError`` listing the known names otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise KeyError(f"unknown dataset {name!r}; known datasets: {', '.join(_REGISTRY)}") from None


def _stamp(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return (str(path), stat.st_mtime_ns, stat.st_size)


def _shape_of(parsed) -> tuple[tuple[int, ...], int | None]:
    if isinstance(parsed, np.ndarray):
        return parsed.shape, None
    return parsed.shape, parsed.nnz


@functools.lru_cache(maxsize=64)
def _parsed(name: str, stamps: tuple[tuple[str, int, int], ...]):
    """Parse a verified dataset once per process per (name, file path/mtime/size)."""
    e = _REGISTRY[name]
    parsed = e.parser(*(Path(path) for path, _mtime, _size in stamps))
    relational = parsed if isinstance(parsed, RelationalGraph) else None
    matrix = relational.adjacency() if relational is not None else parsed
    if e.symmetrize:
        matrix = symmetrize(matrix)
    shape, nnz = _shape_of(matrix)
    if (e.shape is not None and shape != e.shape) or (e.nnz is not None and nnz != e.nnz):
        raise ValueError(
            f"dataset {name!r} parsed to shape {shape} with {nnz} non-zeros, "
            f"but the registry expects {e.shape} with {e.nnz}"
        )
    arrays = [matrix] if isinstance(matrix, np.ndarray) else [matrix.data, matrix.indices, matrix.indptr]
    for array in arrays:
        array.flags.writeable = False
    return matrix, relational


def _load_parsed(name: str):
    e = entry(name)
    paths = [locate(file) for file in e.files]
    return _parsed(e.name, tuple(_stamp(path) for path in paths))


def load(name: str):
    """Load dataset ``name``: a canonical CSR matrix, a fresh copy the caller may modify.

    Relational graphs give all relations merged; point clouds an ``(N, 4)`` float32 array.
    Files are verified against their sha256 (``ValueError`` on a mismatch). When no route has a
    file, :class:`DatasetUnavailableError` (a ``FileNotFoundError``) says what each route answered.
    """
    matrix, _relational = _load_parsed(name)
    return matrix.copy()


def load_relational(name: str) -> RelationalGraph:
    """The typed edges of relational graph ``name`` (see :func:`relational_graphs`)."""
    if entry(name).kind != "rdf":
        raise ValueError(f"dataset {name!r} is a {entry(name).kind}, not a relational graph; "
                         f"relational graphs: {', '.join(relational_graphs())}")
    return _load_parsed(name)[1]


def clear_caches() -> None:
    """Forget the parsed matrices held by this process (checksums stay cached per file mtime)."""
    _parsed.cache_clear()


_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def dataset_slug(name: str) -> str:
    """A file-name-safe form of a dataset name or generator spec (``rmat:12:16`` -> ``rmat-12-16``)."""
    return _SLUG_UNSAFE.sub("-", name).strip("-")
