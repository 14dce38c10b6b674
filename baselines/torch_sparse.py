"""torch.sparse baselines: MKL / ATen kernels on the CPU, cuSPARSE on a CUDA device.

Each factory converts its inputs once (outside timing; numpy arrays are shared zero-copy on
the CPU, copied once to the GPU with ``device="cuda"``) and returns a zero-argument callable
that computes the operation and returns a torch tensor.

SpMM variants, all ``A @ B``:

- ``torch-csr-i64`` / ``torch-csr-i32``: ``torch.mm(A_csr, B, out=C)``, the same kernel as
  ``torch.sparse.mm(A_csr, B)`` but into a preallocated C; int64 or int32 crow/col indices.
- ``torch-reduce-sum``: ``torch.sparse.mm(A_csr, B, reduce="sum")``, the kernel PyG uses;
  it has no ``out=`` form, so it allocates C on every call.
(Dense matmul is its own baseline module, ``baselines.dense``.)

Aggregation (``sparsetir.reference.aggregate``'s forward stages; A's pattern, values ignored):

- ``torch-sparse-amax`` / ``torch-sparse-amin`` (``aggregate-max`` / ``aggregate-min``):
  ``torch.sparse.mm(A_csr, B, reduce="amax")``, 0 on an empty row; torch has it on the CPU only.
- ``torch-csr-mean`` (``aggregate-mean``): ``torch.mm(A_mean, B)`` with ``A_mean``'s values ``1 / degree``
  (cuSPARSE on a GPU); ``torch-csr-mean-dropped`` (``aggregate-mean-masked``): the same product of
  ``B * M`` (dropout applied first, as an unfused model does), the mask given as uint8.

SDDMM variant ``torch-sampled-addmm``: ``torch.sparse.sampled_addmm(A_csr, X, Y.T, beta=0)``
into a preallocated CSR result, then ``values *= A.data``.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings

import numpy as np
import torch

from baselines import Variant
from baselines.scipy_sparse import canonical_csr


def check_device(device: str) -> str:
    """``device`` if torch can use it ("cpu" or "cuda"), else ``ValueError`` / ``RuntimeError``."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"torch {torch.__version__} sees no CUDA GPU")
    return device


def _backend(device: str) -> tuple[bool, str]:
    """What computes the op on ``device``: MKL/ATen on the CPU, cuSPARSE on a GPU."""
    if device == "cuda":
        return True, f"torch {torch.__version__}, cuSPARSE (CUDA {torch.version.cuda})"
    return True, f"torch {torch.__version__} (MKL {'on' if torch.backends.mkl.is_available() else 'off'})"


def _sampled_addmm_check(device: str) -> tuple[bool, str]:
    return _backend(device) if device == "cuda" else _sampled_addmm_works()


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


def csr_tensor(A, dtype: np.dtype, index_dtype: str = "int64", device: str = "cpu"):
    """A (scipy, any layout) as a torch CSR tensor of ``dtype`` values and ``index_dtype`` indices."""
    A = canonical_csr(A, dtype)
    tensor = _sparse_csr_tensor(
        torch.from_numpy(A.indptr.astype(index_dtype, copy=False)),
        torch.from_numpy(A.indices.astype(index_dtype, copy=False)),
        torch.from_numpy(A.data),
        A.shape,
    )
    return tensor if device == "cpu" else tensor.to(check_device(device))


def _sparse_csr_tensor(crow, col, values, shape):
    """``torch.sparse_csr_tensor`` with its invariants checked once, without the beta warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        return torch.sparse_csr_tensor(crow, col, values, size=shape, check_invariants=True)


def dense_tensor(B: np.ndarray, rows: int, device: str = "cpu"):
    """``B`` as a torch tensor on ``device`` (zero-copy on the CPU), checking it has ``rows`` rows."""
    B = np.ascontiguousarray(B)
    if B.ndim != 2 or B.shape[0] != rows:
        raise ValueError(f"B must have shape ({rows}, feat), got {B.shape}")
    tensor = torch.from_numpy(B)
    return tensor if device == "cpu" else tensor.to(check_device(device))


def spmm_csr(A, B: np.ndarray, *, index_dtype: str = "int64", device: str = "cpu"):
    """``torch.mm(A_csr, B, out=C)`` with ``index_dtype`` indices (cuSPARSE on CUDA)."""
    A_t = csr_tensor(A, B.dtype, index_dtype, device)
    B_t = dense_tensor(B, A_t.shape[1], device)
    out = torch.empty((A_t.shape[0], B_t.shape[1]), dtype=B_t.dtype, device=device)
    return lambda: torch.mm(A_t, B_t, out=out)


def spmm_reduce_sum(A, B: np.ndarray, *, device: str = "cpu"):
    """``torch.sparse.mm(A_csr, B, reduce="sum")`` (int64 indices, as PyG builds them)."""
    A_t = csr_tensor(A, B.dtype, device=device)
    B_t = dense_tensor(B, A_t.shape[1], device)
    return lambda: torch.sparse.mm(A_t, B_t, reduce="sum")


def _pattern(A, mean: bool = False):
    """A's pattern with values 1 (``mean``: ``1 / degree``, its row's number of entries)."""
    A = canonical_csr(A, np.float32)
    degree = np.diff(A.indptr)
    row_values = 1.0 / np.maximum(degree, 1) if mean else np.ones(degree.shape[0])
    return type(A)((np.repeat(row_values.astype(np.float32), degree), A.indices, A.indptr), shape=A.shape)


def spmm_reduce_extreme(A, B: np.ndarray, *, reduce: str, device: str = "cpu"):
    """``torch.sparse.mm(A_csr, B, reduce=reduce)`` (``"amax"``/``"amin"``; empty rows 0)."""
    A_t = csr_tensor(_pattern(A), B.dtype, device=device)
    B_t = dense_tensor(B, A_t.shape[1], device)
    return lambda: torch.sparse.mm(A_t, B_t, reduce=reduce)


def csr_mean(A, B: np.ndarray, M: np.ndarray | None = None, *, device: str = "cpu"):
    """``A_mean @ B`` (``A_mean @ (B * M)`` with a uint8 keep mask ``M``) by ``torch.mm`` into a preallocated C."""
    A_t = csr_tensor(_pattern(A, mean=True), B.dtype, device=device)
    B_t = dense_tensor(B, A_t.shape[1], device)
    out = torch.empty((A_t.shape[0], B_t.shape[1]), dtype=B_t.dtype, device=device)
    if M is None:
        return lambda: torch.mm(A_t, B_t, out=out)
    mask = dense_tensor(M, A_t.shape[1], device).to(torch.bool)
    return lambda: torch.mm(A_t, B_t * mask, out=out)


def _reduce_on_cpu(device: str) -> tuple[bool, str]:
    if device != "cpu":
        return False, f"torch {torch.__version__} has torch.sparse.mm(reduce='amax') on the CPU only"
    return _backend(device)


def sddmm_sampled_addmm(A, X: np.ndarray, Y: np.ndarray, *, device: str = "cpu"):
    """``A.data * (X[i] . Y[j])`` via ``sampled_addmm`` into a preallocated CSR result."""
    ok, reason = _sampled_addmm_check(device)
    if not ok:
        raise RuntimeError(reason)
    pattern = csr_tensor(A, X.dtype, device=device)
    m, n = pattern.shape
    if X.ndim != 2 or Y.ndim != 2 or len(X) != m or len(Y) != n or X.shape[1] != Y.shape[1]:
        raise ValueError(f"X must be ({m}, k) and Y ({n}, k) with the same k, got {X.shape} and {Y.shape}")
    X_t = dense_tensor(X, m, device)
    Y_t = dense_tensor(Y, n, device).T  # (k, n) view, no copy
    values = pattern.values()
    out = pattern.clone()
    out_values = out.values()

    def run():
        torch.sparse.sampled_addmm(pattern, X_t, Y_t, beta=0.0, out=out)
        return out_values.mul_(values)

    return run


SPMM_CSR_I32 = Variant(functools.partial(spmm_csr, index_dtype="int32"), library_reference=True,
                       reference_on=("cuda",), check=_backend)
# torch is a hard dependency (no probe). The int32 CSR mm is cuSPARSE's SpMM on a GPU: SpMM's reference there,
# and one of PrunedBERT's baselines (a pruned weight times the activations).
VARIANTS = {
    "spmm": {
        "torch-csr-i64": Variant(functools.partial(spmm_csr, index_dtype="int64"), library_reference=True,
                                 check=_backend),
        "torch-csr-i32": SPMM_CSR_I32,
        "torch-reduce-sum": Variant(spmm_reduce_sum, library_reference=True, check=_backend),
    },
    "sddmm": {"torch-sampled-addmm": Variant(sddmm_sampled_addmm, library_reference=True, reference_on=("cpu", "cuda"),
                                             check=_sampled_addmm_check)},
    "aggregate-max": {"torch-sparse-amax": Variant(functools.partial(spmm_reduce_extreme, reduce="amax"),
                                                   library_reference=True, check=_reduce_on_cpu)},
    "aggregate-min": {"torch-sparse-amin": Variant(functools.partial(spmm_reduce_extreme, reduce="amin"),
                                                   library_reference=True, check=_reduce_on_cpu)},
    "aggregate-mean": {"torch-csr-mean": Variant(csr_mean, library_reference=True, check=_backend)},
    "aggregate-mean-masked": {"torch-csr-mean-dropped": Variant(csr_mean, library_reference=True, check=_backend)},
    "prunedbert": {"torch-csr-i32": dataclasses.replace(SPMM_CSR_I32, library_reference=False, reference_on=())},
}
