"""torch.sparse baselines on the CPU (MKL / ATen kernels, torch's intra-op thread pool).

Each factory converts its inputs once (outside timing; numpy arrays are shared zero-copy) and
returns a zero-argument callable that computes the operation and returns a torch tensor.

SpMM variants, all ``A @ B``:

- ``torch-csr-i64`` / ``torch-csr-i32``: ``torch.mm(A_csr, B, out=C)``, the same kernel as
  ``torch.sparse.mm(A_csr, B)`` but into a preallocated C; int64 or int32 crow/col indices.
- ``torch-reduce-sum``: ``torch.sparse.mm(A_csr, B, reduce="sum")``, the kernel PyG uses;
  it has no ``out=`` form, so it allocates C on every call.
- ``torch-dense``: ``torch.mm(A_dense, B, out=C)``, only when dense A fits in
  ``DENSE_LIMIT_BYTES``.

SDDMM variant ``torch-sampled-addmm``: ``torch.sparse.sampled_addmm(A_csr, X, Y.T, beta=0)``
into a preallocated CSR result, then ``values *= A.data``.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from baselines.scipy_sparse import canonical_csr

try:
    import torch
except ImportError as error:  # pragma: no cover - torch is a project dependency
    torch = None
    _IMPORT_ERROR = f"torch is not importable: {error}"
else:
    _IMPORT_ERROR = None

DENSE_LIMIT_BYTES = 2 << 30


def available(op: str = "spmm") -> tuple[bool, str]:
    """Whether torch can run ``op`` ("spmm" or "sddmm") on the CPU, and why not."""
    if op not in ("spmm", "sddmm"):
        raise ValueError(f"unknown op {op!r}; expected 'spmm' or 'sddmm'")
    if torch is None:
        return False, _IMPORT_ERROR
    if op == "sddmm":
        return _sampled_addmm_works()
    return True, f"torch {torch.__version__} (MKL {'on' if torch.backends.mkl.is_available() else 'off'})"


@functools.cache
def _sampled_addmm_works() -> tuple[bool, str]:
    pattern = _sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.ones(2), (2, 2))
    try:
        got = torch.sparse.sampled_addmm(pattern, torch.eye(2), torch.eye(2), beta=0.0)
    except (RuntimeError, NotImplementedError) as error:
        return False, f"torch {torch.__version__}: sampled_addmm fails on CPU CSR: {error}"
    if not torch.equal(got.values(), torch.zeros(2)):
        return False, f"torch {torch.__version__}: sampled_addmm on CPU CSR gives wrong values"
    return True, f"torch {torch.__version__}, sampled_addmm on CPU CSR"


def csr_tensor(A, dtype: np.dtype, index_dtype: str = "int64"):
    """A (scipy, any layout) as a torch CSR tensor of ``dtype`` values and ``index_dtype`` indices."""
    A = canonical_csr(A, dtype)
    return _sparse_csr_tensor(
        torch.from_numpy(A.indptr.astype(index_dtype, copy=False)),
        torch.from_numpy(A.indices.astype(index_dtype, copy=False)),
        torch.from_numpy(A.data),
        A.shape,
    )


def _sparse_csr_tensor(crow, col, values, shape):
    """``torch.sparse_csr_tensor`` with its invariants checked once, without the beta warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        return torch.sparse_csr_tensor(crow, col, values, size=shape, check_invariants=True)


def _dense_rhs(B: np.ndarray, rows: int):
    B = np.ascontiguousarray(B)
    if B.ndim != 2 or B.shape[0] != rows:
        raise ValueError(f"B must have shape ({rows}, feat), got {B.shape}")
    return torch.from_numpy(B)


def spmm_csr(A, B: np.ndarray, *, index_dtype: str = "int64"):
    """``torch.mm(A_csr, B, out=C)`` with ``index_dtype`` indices."""
    A_t = csr_tensor(A, B.dtype, index_dtype)
    B_t = _dense_rhs(B, A_t.shape[1])
    out = torch.empty((A_t.shape[0], B_t.shape[1]), dtype=B_t.dtype)
    return lambda: torch.mm(A_t, B_t, out=out)


def spmm_reduce_sum(A, B: np.ndarray):
    """``torch.sparse.mm(A_csr, B, reduce="sum")`` (int64 indices, as PyG builds them)."""
    A_t = csr_tensor(A, B.dtype)
    B_t = _dense_rhs(B, A_t.shape[1])
    return lambda: torch.sparse.mm(A_t, B_t, reduce="sum")


def spmm_dense(A, B: np.ndarray):
    """``torch.mm(A_dense, B, out=C)``; raises ``ValueError`` when dense A exceeds the limit."""
    m, n = A.shape
    dense_bytes = m * n * np.dtype(B.dtype).itemsize
    if dense_bytes > DENSE_LIMIT_BYTES:
        raise ValueError(
            f"dense A would take {dense_bytes / 2**30:.1f} GiB, over the {DENSE_LIMIT_BYTES / 2**30:.0f} GiB limit"
        )
    A_t = torch.from_numpy(canonical_csr(A, B.dtype).toarray())
    B_t = _dense_rhs(B, n)
    out = torch.empty((m, B_t.shape[1]), dtype=B_t.dtype)
    return lambda: torch.mm(A_t, B_t, out=out)


def sddmm_sampled_addmm(A, X: np.ndarray, Y: np.ndarray):
    """``A.data * (X[i] . Y[j])`` via ``sampled_addmm`` into a preallocated CSR result."""
    ok, reason = available("sddmm")
    if not ok:
        raise RuntimeError(reason)
    pattern = csr_tensor(A, X.dtype)
    m, n = pattern.shape
    if X.ndim != 2 or Y.ndim != 2 or len(X) != m or len(Y) != n or X.shape[1] != Y.shape[1]:
        raise ValueError(f"X must be ({m}, k) and Y ({n}, k) with the same k, got {X.shape} and {Y.shape}")
    X_t = torch.from_numpy(np.ascontiguousarray(X))
    Y_t = torch.from_numpy(np.ascontiguousarray(Y)).T  # (k, n) view, no copy
    values = pattern.values()
    out = pattern.clone()
    out_values = out.values()

    def run():
        torch.sparse.sampled_addmm(pattern, X_t, Y_t, beta=0.0, out=out)
        return out_values.mul_(values)

    return run


SPMM_VARIANTS = {
    "torch-csr-i64": functools.partial(spmm_csr, index_dtype="int64"),
    "torch-csr-i32": functools.partial(spmm_csr, index_dtype="int32"),
    "torch-reduce-sum": spmm_reduce_sum,
    "torch-dense": spmm_dense,
}
SDDMM_VARIANTS = {"torch-sampled-addmm": sddmm_sampled_addmm}
