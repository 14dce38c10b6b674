"""SpMM's reference: ``C = A @ B`` in float64, its tolerance, its bytes and flops."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .case import Case, rounding_tolerance
from .registry import OpReference, register_reference


def spmm_case(A: sp.csr_matrix, feat: int, rng: np.random.Generator) -> Case:
    """``C = A @ B`` for a random standard-normal float32 B."""
    return spmm_reference(A, rng.standard_normal((A.shape[1], feat), dtype=np.float32))


def spmm_reference(A: sp.csr_matrix, B: np.ndarray) -> Case:
    """``C = A @ B`` in float64; min bytes: values+indices, indptr, B and C each moved once (float32/int32)."""
    m, n = A.shape
    feat = B.shape[1]
    A = A.tocsr()
    # Duplicates are kept as stored: scipy's astype() and abs() sum them in A's dtype first, which would round the
    # reference in float32 and, where duplicates cancel, shrink |A| below the terms a kernel actually adds up
    A64 = sp.csr_matrix((A.data.astype(np.float64), A.indices, A.indptr), shape=A.shape)
    B64 = B.astype(np.float64)
    reference = A64 @ B64
    magnitude = sp.csr_matrix((np.abs(A64.data), A64.indices, A64.indptr), shape=A.shape) @ np.abs(B64)
    tolerance = rounding_tolerance(magnitude, (np.diff(A.indptr) + 1.0)[:, None])
    min_bytes = A.nnz * 8 + (m + 1) * 4 + n * feat * 4 + m * feat * 4
    return Case((B,), reference, tolerance, min_bytes)


def spmm_flops(nnz: int, feat: int) -> int:
    """``2 nnz F``: one multiply and one add per non-zero and feature."""
    return 2 * nnz * feat


SPMM_REFERENCE = register_reference(OpReference(
    name="spmm",
    make_case=spmm_case,
    reference=spmm_reference,
    flops=spmm_flops,
))
