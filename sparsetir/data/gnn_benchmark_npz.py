"""gnn-benchmark ``.npz`` graphs (Shchur et al.): the adjacency stored as plain CSR arrays.

Two spellings occur: ``adj_data/adj_indices/adj_indptr/adj_shape`` (gnn-benchmark) and
``adj_matrix.data/.indices/.indptr/.shape`` (the PPNP copy of cora_ml). Nothing is unpickled.
The archive's declared size, the shape and the entry count are checked against ``max_bytes`` and
``max_nnz`` (:mod:`sparsetir.data.size_limits`) before the matrix is built.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_arrays
from .safe_npz import NPZ_READ_ERRORS
from .size_limits import size_limits

__all__ = ["read_gnn_benchmark_npz"]

_PREFIXES = ("adj_", "adj_matrix.")
_PARTS = ("data", "indices", "indptr", "shape")


def read_gnn_benchmark_npz(path: str | Path, *, max_nnz: int | None = None,
                           max_bytes: int | None = None) -> sp.csr_matrix:
    """Read the adjacency matrix of a gnn-benchmark ``.npz`` file as canonical CSR."""
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, *NPZ_READ_ERRORS) as err:
        raise ValueError(f"{path}: not a readable .npz archive, it may be truncated or corrupt: {err}") from None
    with archive:
        limits.archive(archive.zip, str(path))
        for prefix in _PREFIXES:
            keys = [prefix + part for part in _PARTS]
            if all(key in archive.files for key in keys):
                break
        else:
            raise ValueError(
                f"{path}: no adjacency arrays found (expected adj_data/adj_indices/adj_indptr/adj_shape); "
                f"it holds {', '.join(archive.files)}"
            )
        try:
            data, indices, indptr, shape = (archive[key] for key in keys)
        except (ValueError, *NPZ_READ_ERRORS) as err:
            raise ValueError(f"{path}: truncated or corrupt adjacency arrays: {err}") from None
    if shape.shape != (2,):
        raise ValueError(f"{path}: {keys[3]} must hold two integers, got shape {shape.shape}")
    limits.shape(shape, str(path))
    limits.entries(indices.size, str(path))
    try:
        return csr_from_arrays(indptr, indices, data, tuple(shape))
    except (ValueError, TypeError) as err:
        raise type(err)(f"{path}: invalid adjacency: {err}") from None
