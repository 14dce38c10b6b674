"""SDDMM's reference: ``A.data * (X[i] . Y[j])`` in float64, its tolerance, its bytes and flops."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..runtime.validate import entry_rows
from .case import Case, rounding_tolerance
from .registry import OpReference, register_reference


def sddmm_case(A: sp.csr_matrix, feat: int, rng: np.random.Generator) -> Case:
    """``A.data * (X[i] . Y[j])`` for random standard-normal float32 X and Y."""
    m, n = A.shape
    X = rng.standard_normal((m, feat), dtype=np.float32)
    return sddmm_reference(A, X, rng.standard_normal((n, feat), dtype=np.float32))


def sddmm_reference(A: sp.csr_matrix, X: np.ndarray, Y: np.ndarray) -> Case:
    """``A.data * (X[i] . Y[j])`` in float64; min bytes: A (values+indices, indptr), X, Y and the output once."""
    m, n = A.shape
    feat = X.shape[1]
    rows, cols = entry_rows(A.indptr), A.indices
    values = A.data.astype(np.float64)
    X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
    reference = values * np.einsum("ij,ij->i", X64[rows], Y64[cols])
    magnitude = np.abs(values) * np.einsum("ij,ij->i", np.abs(X64[rows]), np.abs(Y64[cols]))
    tolerance = rounding_tolerance(magnitude, feat + 1)
    min_bytes = A.nnz * 8 + (m + 1) * 4 + m * feat * 4 + n * feat * 4 + A.nnz * 4
    return Case((X, Y), reference, tolerance, min_bytes)


def sddmm_flops(nnz: int, feat: int) -> int:
    """``2 nnz F + nnz``: the dot products, then the scaling by A's values."""
    return 2 * nnz * feat + nnz


SDDMM_REFERENCE = register_reference(OpReference(
    name="sddmm",
    make_case=sddmm_case,
    reference=sddmm_reference,
    flops=sddmm_flops,
))
