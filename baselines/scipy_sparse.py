"""scipy.sparse baselines (single-threaded): CSR SpMM and a vectorised numpy SDDMM.

Each factory prepares its inputs once (outside timing) and returns a zero-argument callable
that computes the operation into a preallocated output and returns that output.

- SpMM ``A @ B``: scipy's own ``csr_matvecs`` kernel (what ``csr_matrix @ ndarray`` calls),
  accumulating into a zeroed, preallocated output instead of a fresh ``np.zeros``.
- SDDMM ``A.data * (X[rows] * Y[cols]).sum(1)``: gathered row dot products, chunked over the
  non-zeros so the temporaries stay near ``SDDMM_CHUNK_BYTES``.
"""

from __future__ import annotations

import numpy as np
import scipy
import scipy.sparse as sp

from baselines import Variant

try:  # the kernel behind csr_matrix @ ndarray; private, so fall back to the public operator
    from scipy.sparse._sparsetools import csr_matvecs as _csr_matvecs
except ImportError:  # pragma: no cover - depends on the scipy build
    _csr_matvecs = None

SDDMM_CHUNK_BYTES = 8 << 20


def _spmm_path(device: str) -> tuple[bool, str]:
    path = "csr_matvecs into a preallocated output" if _csr_matvecs else "A @ B (allocates its output)"
    return True, f"scipy {scipy.__version__}, {path}"


def _sddmm_path(device: str) -> tuple[bool, str]:
    return True, f"scipy {scipy.__version__} + numpy {np.__version__}, chunked gather-dot"


def canonical_csr(A, dtype) -> sp.csr_matrix:
    """A as CSR with ``dtype`` values, sorted indices and duplicates summed; the caller's A is untouched."""
    A = sp.csr_matrix(A, dtype=dtype)
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()
    return A


def spmm(A: sp.spmatrix, B: np.ndarray):
    """``A @ B`` with scipy's CSR kernel; returns a callable writing into a preallocated output."""
    B = np.ascontiguousarray(B)
    A = canonical_csr(A, B.dtype)
    m, n = A.shape
    if B.ndim != 2 or B.shape[0] != n:
        raise ValueError(f"B must have shape ({n}, feat), got {B.shape}")
    if _csr_matvecs is None:
        return lambda: A @ B
    feat = B.shape[1]
    out = np.empty((m, feat), dtype=B.dtype)
    indptr, indices, data = A.indptr, A.indices, A.data
    flat_b, flat_out = B.ravel(), out.ravel()

    def run():
        out.fill(0)  # csr_matvecs accumulates
        _csr_matvecs(m, n, feat, indptr, indices, data, flat_b, flat_out)
        return out

    return run


def sddmm(A: sp.spmatrix, X: np.ndarray, Y: np.ndarray):
    """``A.data * (X[i] . Y[j])`` on A's non-zeros, in A's CSR order; returns a callable."""
    A = canonical_csr(A, X.dtype)
    m, n = A.shape
    if X.ndim != 2 or Y.ndim != 2 or len(X) != m or len(Y) != n or X.shape[1] != Y.shape[1]:
        raise ValueError(f"X must be ({m}, k) and Y ({n}, k) with the same k, got {X.shape} and {Y.shape}")
    rows = np.repeat(np.arange(m, dtype=A.indices.dtype), np.diff(A.indptr))
    cols, values = A.indices, A.data
    out = np.empty(A.nnz, dtype=X.dtype)
    chunk = max(1, SDDMM_CHUNK_BYTES // max(1, X.shape[1] * X.itemsize))

    def run():
        for lo in range(0, len(out), chunk):
            hi = lo + chunk
            np.einsum("ij,ij->i", X[rows[lo:hi]], Y[cols[lo:hi]], out=out[lo:hi])
        np.multiply(out, values, out=out)
        return out

    return run


# scipy is a hard dependency (no probe); it runs on the CPU only.
VARIANTS = {
    "spmm": {"scipy": Variant(spmm, devices=("cpu",), library_reference=True, check=_spmm_path)},
    "sddmm": {"scipy": Variant(sddmm, devices=("cpu",), library_reference=True, check=_sddmm_path)},
}
