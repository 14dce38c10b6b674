"""The one canonical CSR form every dataset parser returns.

Canonical means: a ``scipy.sparse.csr_matrix`` with sorted column indices, no duplicate
coordinates, explicit zeros kept, and ``indptr``/``indices`` of one integer dtype (int32 when
the matrix fits, else int64). Pattern-only inputs (no values in the file) get float32 ones and
their duplicates collapse to a single one; inputs with values have their duplicates summed.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..runtime.validate import check_indices, check_indptr

__all__ = ["canonical_csr", "csr_from_arrays", "csr_from_coordinates"]

_INT32_MAX = np.iinfo(np.int32).max


def _as_index_array(values, what: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{what} must hold integers, got dtype {array.dtype}")
    return array.astype(np.int64, copy=False)


def _check_shape(shape) -> tuple[int, int]:
    try:
        rows, cols = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be two integers, got {shape!r}") from None
    if rows < 0 or cols < 0:
        raise ValueError(f"shape must be non-negative, got {(rows, cols)}")
    return rows, cols


def canonical_csr(matrix, *, pattern: bool = False) -> sp.csr_matrix:
    """Return ``matrix`` (any scipy sparse layout) as a new canonical CSR matrix.

    With ``pattern=True`` the values are replaced by float32 ones after duplicates collapse.
    """
    if not sp.issparse(matrix):
        raise TypeError(f"expected a scipy.sparse matrix, got {type(matrix).__name__}")
    csr = sp.csr_matrix(matrix, copy=True)
    csr.sum_duplicates()  # also sorts the indices of every row
    if pattern:
        csr.data = np.ones(csr.nnz, dtype=np.float32)
    index_dtype = np.int32 if max(csr.shape + (csr.nnz,)) <= _INT32_MAX else np.int64
    csr.indptr = csr.indptr.astype(index_dtype, copy=False)
    csr.indices = csr.indices.astype(index_dtype, copy=False)
    csr.check_format(full_check=True)
    return csr


def csr_from_arrays(indptr, indices, data, shape, *, pattern: bool = False) -> sp.csr_matrix:
    """Build a canonical CSR matrix from raw arrays, validating them first.

    ``data`` may be ``None`` for a pattern-only matrix (then ``pattern`` is implied).
    """
    rows, cols = _check_shape(shape)
    indptr = _as_index_array(indptr, "indptr")
    indices = _as_index_array(indices, "indices")
    check_indptr(indptr, name="indptr", rows=rows, nnz=indices.size)
    check_indices(indices, name="indices", length=cols)
    if data is None:
        pattern = True
        data = np.ones(indices.size, dtype=np.float32)
    else:
        data = np.asarray(data)
        if data.shape != indices.shape:
            raise ValueError(f"data has shape {data.shape} but indices has shape {indices.shape}")
    matrix = sp.csr_matrix((data, indices, indptr), shape=(rows, cols), copy=True)
    return canonical_csr(matrix, pattern=pattern)


def csr_from_coordinates(rows, cols, shape, values=None) -> sp.csr_matrix:
    """Build a canonical CSR matrix from coordinate arrays (``values=None``: pattern only)."""
    n_rows, n_cols = _check_shape(shape)
    rows = _as_index_array(rows, "row coordinates")
    cols = _as_index_array(cols, "column coordinates")
    if rows.shape != cols.shape:
        raise ValueError(f"{rows.size} row coordinates but {cols.size} column coordinates")
    for coords, extent, what in ((rows, n_rows, "row"), (cols, n_cols, "column")):
        if coords.size and (coords.min() < 0 or coords.max() >= extent):
            bad = int(coords.min()) if coords.min() < 0 else int(coords.max())
            raise ValueError(f"{what} coordinate {bad} is out of range for {extent} {what}s")
    pattern = values is None
    if pattern:
        values = np.ones(rows.size, dtype=np.float32)
    else:
        values = np.asarray(values)
        if values.shape != rows.shape:
            raise ValueError(f"{values.size} values but {rows.size} coordinates")
    matrix = sp.coo_matrix((values, (rows, cols)), shape=(n_rows, n_cols))
    return canonical_csr(matrix, pattern=pattern)
