"""A matrix fingerprint for the tuning database: shape, nnz and the degree histogram.

Two matrices with the same fingerprint get the same tuned configuration. The
histogram counts rows by ``ceil(log2(degree + 1))`` (bin 0: empty rows), which is
what format and schedule choices depend on, without hashing every index.
"""

from __future__ import annotations

import numpy as np


def degree_histogram(indptr) -> list[int]:
    """Rows per bin ``ceil(log2(degree + 1))``: bin 0 empty rows, bin 1 degree 1, bin 2 degrees 2-3, ..."""
    degrees = np.diff(np.asarray(indptr, dtype=np.int64))
    if degrees.size == 0:
        return []
    bins = np.zeros(degrees.shape, dtype=np.int64)
    positive = degrees > 0
    bins[positive] = np.floor(np.log2(degrees[positive])).astype(np.int64) + 1
    return [int(count) for count in np.bincount(bins)]


def fingerprint(matrix) -> dict:
    """``{"shape", "nnz", "degree_histogram"}`` of a validated CSR input (``formats.read_sparse_input``)."""
    m, n = matrix.shape
    return {"shape": [int(m), int(n)], "nnz": int(matrix.nnz), "degree_histogram": degree_histogram(matrix.indptr)}
