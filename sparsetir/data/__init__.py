"""Real sparse datasets: a checksummed registry, safe parsers, and seeded generators.

``load(name)`` returns a canonical ``scipy.sparse.csr_matrix`` (sorted indices, no duplicates)
for any registered graph or matrix; ``graphs()``, ``benchmark_graphs()``, ``matrices()``,
``relational_graphs()`` and ``point_clouds()`` list them. Files resolve from the embedded
``data/`` folder, the cache, the mirror (``$SPARSETIR_DATA_MIRROR``), then a download, each copy
verified (sha256); ``probe(file)`` asks the same routes without downloading. Each file
format has its own parser module; pickled payloads are only ever read through ``safe_pickle``.
Every parser takes ``max_nnz`` / ``max_bytes`` and refuses a larger input before allocating
(:class:`DataTooLargeError`, see ``size_limits``).
``generate(spec)`` makes seeded R-MAT, power-law and uniform matrices; ``masks`` makes block
masks for sparse attention (Longformer, BigBird, butterfly) and reads DLMC's pruned weights.
"""

from . import masks
from .archive_member import archive_members, open_member
from .cache import CACHE_ENV, cache_dir
from .csr_canonical import canonical_csr, csr_from_arrays, csr_from_coordinates
from .download import DOWNLOAD_ENV, DownloadError, download
from .embedded import EMBEDDED_ENV, embedded_dir
from .generators import generate, is_generated, power_law, rmat
from .gnn_benchmark_npz import read_gnn_benchmark_npz
from .graphdata_npz import read_graphdata_npz
from .kitti_bin import read_kitti_bin
from .matrix_market import read_matrix_market
from .metis import read_metis
from .mirror import MIRROR_ENV, mirror_dir
from .networkx_json import read_node_link_splits
from .ntriples import read_ntriples, read_ntriples_member
from .ogb_archive import read_ogb_edge_archive, read_ogb_knowledge_graph
from .planetoid import read_planetoid_graph
from .rdf_graph import RelationalGraph
from .registry import (
    BENCHMARK_MIN_NNZ,
    PAPER_GNN_GRAPHS,
    PAPER_RGCN_GRAPHS,
    DataFile,
    DatasetEntry,
    DatasetUnavailableError,
    benchmark_graphs,
    clear_caches,
    dataset_slug,
    entry,
    graphs,
    load,
    load_relational,
    matrices,
    names,
    point_clouds,
    relational_graphs,
    search_dirs,
)
from .resolve import Probe, probe
from .safe_pickle import RefusedGlobalError, RestrictedUnpickler, restricted_load, restricted_loads
from .scipy_npz import read_scipy_npz, read_scipy_npz_member
from .size_limits import MAX_BYTES_ENV, MAX_NNZ_ENV, DataTooLargeError, size_limits
from .smtx import read_smtx
from .snap_edge_list import read_edge_list
from .symmetrize import symmetrize

__all__ = [
    "BENCHMARK_MIN_NNZ",
    "CACHE_ENV",
    "DOWNLOAD_ENV",
    "EMBEDDED_ENV",
    "MAX_BYTES_ENV",
    "MAX_NNZ_ENV",
    "MIRROR_ENV",
    "Probe",
    "PAPER_GNN_GRAPHS",
    "PAPER_RGCN_GRAPHS",
    "DataFile",
    "DatasetEntry",
    "DataTooLargeError",
    "DatasetUnavailableError",
    "DownloadError",
    "RefusedGlobalError",
    "RelationalGraph",
    "RestrictedUnpickler",
    "archive_members",
    "benchmark_graphs",
    "cache_dir",
    "canonical_csr",
    "clear_caches",
    "dataset_slug",
    "csr_from_arrays",
    "csr_from_coordinates",
    "download",
    "embedded_dir",
    "entry",
    "generate",
    "graphs",
    "is_generated",
    "load",
    "load_relational",
    "masks",
    "matrices",
    "mirror_dir",
    "names",
    "open_member",
    "point_clouds",
    "power_law",
    "probe",
    "read_edge_list",
    "read_gnn_benchmark_npz",
    "read_graphdata_npz",
    "read_kitti_bin",
    "read_matrix_market",
    "read_metis",
    "read_node_link_splits",
    "read_ntriples",
    "read_ntriples_member",
    "read_ogb_edge_archive",
    "read_ogb_knowledge_graph",
    "read_planetoid_graph",
    "read_scipy_npz",
    "read_scipy_npz_member",
    "read_smtx",
    "relational_graphs",
    "restricted_load",
    "restricted_loads",
    "rmat",
    "search_dirs",
    "size_limits",
    "symmetrize",
]
