"""Graphs whose files carry node features and labels, for node classification (GraphSAGE training).

``load_node_classification(name)`` returns a :class:`NodeClassificationGraph`: the adjacency
(symmetrised, canonical, a float32 pattern), the features (a float32 CSR matrix: these
bag-of-words features are stored sparse) and integer labels. The files resolve and are verified
like every registry file (embedded ``data/``, cache, mirror, download; sha256 from the folder's
``provenance.txt``):

- ``gnn-benchmark-npz/{cora,citeseer}.npz`` (Shchur et al.) and ``cora_ml.npz`` (PPNP): the
  adjacency, ``attr_*`` features and ``labels`` as plain arrays (nothing unpickled);
- ``graphdata-npz/{amazon_cs,amazon_photo,coauthor_cs,dblp}.npz`` (GraphData): ``adj_matrix`` and
  ``node_attr`` are pickled scipy matrices, read through the restricted unpickler;
  ``node_label`` is a plain array.

The gnn-benchmark cora and citeseer differ slightly from the Planetoid graphs of the same name in
the dataset registry (citeseer has 3,312 nodes here, 3,327 there): they are the versions that
come with features and labels. Every parse runs under the parsers' size guards.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_arrays
from .graphdata_npz import GRAPHDATA_GLOBALS, read_graphdata_npz
from .registry import DataFile, entry
from .resolve import locate
from .safe_npz import NPZ_READ_ERRORS, read_npz_member
from .size_limits import size_limits
from .symmetrize import symmetrize

__all__ = ["LABELLED_GRAPHS", "NodeClassificationGraph", "labelled_graphs", "load_node_classification"]

_GNN_BENCHMARK = "https://raw.githubusercontent.com/shchur/gnn-benchmark/1e72912a0810cdf27ae54fd589a3b43358a2b161/data/npz"


@dataclass(frozen=True)
class NodeClassificationGraph:
    """``adjacency`` (n x n canonical CSR, float32 ones, symmetric), ``features`` (n x f float32 CSR),
    ``labels`` (n int64, classes 0 .. ``num_classes`` - 1)."""

    name: str
    adjacency: sp.csr_matrix
    features: sp.csr_matrix
    labels: np.ndarray
    description: str

    @property
    def num_classes(self) -> int:
        return int(self.labels.max()) + 1 if self.labels.size else 0


@dataclass(frozen=True)
class _Source:
    file: DataFile
    kind: str  # "gnn-benchmark" or "graphdata"
    description: str


def _registry_file(name: str) -> DataFile:
    return entry(name).files[0]


LABELLED_GRAPHS: dict[str, _Source] = {
    "cora": _Source(DataFile("gnn-benchmark-npz/cora.npz",
                             "068e22d90c3849b4057dfb05851741428992af058efcd4e7ebb4186f3d581de2", 540580,
                             f"{_GNN_BENCHMARK}/cora.npz"), "gnn-benchmark",
                    "Cora (gnn-benchmark npz): 2,708 papers, 1,433 bag-of-words features, 7 classes"),
    "citeseer": _Source(DataFile("gnn-benchmark-npz/citeseer.npz",
                                 "280278b21b434c047922e8389518861416fb3ad39389c27865ff0e6bbb0aaab7", 1348784,
                                 f"{_GNN_BENCHMARK}/citeseer.npz"), "gnn-benchmark",
                        "Citeseer (gnn-benchmark npz): 3,312 papers, 3,703 features, 6 classes"),
    "cora_ml": _Source(_registry_file("cora_ml"), "gnn-benchmark",
                       "Cora-ML (PPNP npz): 2,995 papers, 2,879 features, 7 classes"),
    "amazon_cs": _Source(_registry_file("amazon_cs"), "graphdata",
                         "Amazon Computers (GraphData npz): 13,752 products, 767 features, 10 classes"),
    "amazon_photo": _Source(_registry_file("amazon_photo"), "graphdata",
                            "Amazon Photo (GraphData npz): 7,650 products, 745 features, 8 classes"),
    "coauthor_cs": _Source(_registry_file("coauthor_cs"), "graphdata",
                           "Coauthor CS (GraphData npz): 18,333 authors, 6,805 features, 15 classes"),
    "dblp": _Source(_registry_file("dblp"), "graphdata",
                    "DBLP (GraphData npz): 17,716 papers, 1,639 features, 4 classes"),
}


def labelled_graphs() -> list[str]:
    """The names :func:`load_node_classification` knows."""
    return list(LABELLED_GRAPHS)


def _gnn_benchmark(path: Path) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
    limits = size_limits(None, None)
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, *NPZ_READ_ERRORS) as err:
        raise ValueError(f"{path}: not a readable .npz archive: {err}") from None
    with archive:
        limits.archive(archive.zip, str(path))
        matrices = []
        for stem in ("adj", "attr"):
            for prefix in (f"{stem}_", f"{stem}_matrix."):
                keys = [prefix + part for part in ("data", "indices", "indptr", "shape")]
                if all(key in archive.files for key in keys):
                    break
            else:
                raise ValueError(f"{path}: no {stem} arrays ({stem}_data/indices/indptr/shape); it holds "
                                 f"{', '.join(archive.files)}")
            try:
                data, indices, indptr, shape = (archive[key] for key in keys)
            except NPZ_READ_ERRORS as err:
                raise ValueError(f"{path}: truncated or corrupt {stem} arrays: {err}") from None
            limits.shape(shape, str(path))
            limits.entries(indices.size, str(path))
            matrices.append((indptr, indices, data, tuple(int(s) for s in shape)))
        if "labels" not in archive.files:
            raise ValueError(f"{path}: no labels array")
        try:
            labels = archive["labels"]
        except NPZ_READ_ERRORS as err:
            raise ValueError(f"{path}: truncated or corrupt labels array: {err}") from None
    adjacency = csr_from_arrays(*matrices[0][:2], None, matrices[0][3])
    features = csr_from_arrays(*matrices[1])
    return adjacency, features, labels


def _graphdata(path: Path) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
    adjacency = read_graphdata_npz(path, "adj_matrix")
    features = read_graphdata_npz(path, "node_attr")
    labels = read_npz_member(path, "node_label", GRAPHDATA_GLOBALS, max_bytes=size_limits(None, None).max_bytes)
    return adjacency, features, labels


@functools.lru_cache(maxsize=8)
def _parsed(name: str, path: str, mtime_ns: int, size: int) -> NodeClassificationGraph:
    source = LABELLED_GRAPHS[name]
    adjacency, features, labels = (_gnn_benchmark if source.kind == "gnn-benchmark" else _graphdata)(Path(path))
    labels = np.asarray(labels)
    n = adjacency.shape[0]
    if adjacency.shape != (n, n):
        raise ValueError(f"{name}: the adjacency must be square, got {adjacency.shape}")
    if features.shape[0] != n or labels.shape != (n,):
        raise ValueError(f"{name}: {n} nodes but features of shape {features.shape} and labels of shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer) or (labels.size and labels.min() < 0):
        raise ValueError(f"{name}: labels must be non-negative integers, got dtype {labels.dtype}")
    adjacency = symmetrize(adjacency)
    adjacency.data = np.ones(adjacency.nnz, dtype=np.float32)
    features = features.astype(np.float32)
    for array in (adjacency.data, adjacency.indices, adjacency.indptr, features.data, features.indices,
                  features.indptr):
        array.flags.writeable = False
    labels = labels.astype(np.int64)
    labels.flags.writeable = False
    return NodeClassificationGraph(name, adjacency, features, labels, source.description)


def load_node_classification(name: str) -> NodeClassificationGraph:
    """The graph ``name`` (see :data:`LABELLED_GRAPHS`) with its features and labels: fresh copies the
    caller may modify (parsed once per process). ``DatasetUnavailableError`` when no route has the file."""
    if name not in LABELLED_GRAPHS:
        raise KeyError(f"no features and labels for {name!r}; labelled graphs: {', '.join(LABELLED_GRAPHS)}")
    path = locate(LABELLED_GRAPHS[name].file)
    stat = path.stat()
    parsed = _parsed(name, str(path), stat.st_mtime_ns, stat.st_size)
    return NodeClassificationGraph(name, parsed.adjacency.copy(), parsed.features.copy(), parsed.labels.copy(),
                                   parsed.description)
