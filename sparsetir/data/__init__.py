"""Real sparse datasets: a checksummed registry over an offline mirror, and safe parsers.

``load(name)`` returns a canonical ``scipy.sparse.csr_matrix`` (sorted indices, no duplicates)
for any registered graph or matrix; ``graphs()``, ``benchmark_graphs()`` and ``matrices()`` list
them. The mirror directory comes from ``$SPARSETIR_DATA_MIRROR``. Each file format has its own
parser module; pickled payloads are only ever read through ``safe_pickle``.
"""

from .csr_canonical import canonical_csr, csr_from_arrays, csr_from_coordinates
from .gnn_benchmark_npz import read_gnn_benchmark_npz
from .graphdata_npz import read_graphdata_npz
from .matrix_market import read_matrix_market
from .mirror import MIRROR_ENV, mirror_dir
from .planetoid import read_planetoid_graph
from .registry import (
    BENCHMARK_MIN_NNZ,
    DataFile,
    DatasetEntry,
    benchmark_graphs,
    clear_caches,
    entry,
    graphs,
    load,
    matrices,
    names,
    search_dirs,
)
from .safe_pickle import RefusedGlobalError, RestrictedUnpickler, restricted_load, restricted_loads
from .smtx import read_smtx
from .snap_edge_list import read_edge_list
from .symmetrize import symmetrize

__all__ = [
    "BENCHMARK_MIN_NNZ",
    "MIRROR_ENV",
    "DataFile",
    "DatasetEntry",
    "RefusedGlobalError",
    "RestrictedUnpickler",
    "benchmark_graphs",
    "canonical_csr",
    "clear_caches",
    "csr_from_arrays",
    "csr_from_coordinates",
    "entry",
    "graphs",
    "load",
    "matrices",
    "mirror_dir",
    "names",
    "read_edge_list",
    "read_gnn_benchmark_npz",
    "read_graphdata_npz",
    "read_matrix_market",
    "read_planetoid_graph",
    "read_smtx",
    "restricted_load",
    "restricted_loads",
    "search_dirs",
    "symmetrize",
]
