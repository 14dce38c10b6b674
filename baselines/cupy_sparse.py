"""cupyx cuSPARSE SpMM baseline (GPU only): ``cupyx.scipy.sparse.csr_matrix @ cupy.ndarray``.

It needs cupy and a CUDA GPU; anywhere else :func:`available` says which one is missing.
cupyx has no SDDMM operator, so it offers SpMM only.
"""

from __future__ import annotations

import numpy as np

from baselines.scipy_sparse import canonical_csr

try:
    import cupy
    import cupyx.scipy.sparse as cupy_sparse
except ImportError as error:
    cupy = None
    _IMPORT_ERROR = f"cupy is not installed ({error}); it needs a CUDA GPU and a cupy-cuda wheel"
else:
    _IMPORT_ERROR = None


def _gpu_count() -> int:
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # cupy raises its own CUDARuntimeError when no driver is present
        return 0


def available(op: str = "spmm", device: str = "cuda") -> tuple[bool, str]:
    """Whether cupyx cuSPARSE can run ``op`` on ``device``, and why not."""
    if op not in ("spmm", "sddmm"):
        raise ValueError(f"unknown op {op!r}; expected 'spmm' or 'sddmm'")
    if cupy is None:
        return False, _IMPORT_ERROR
    if op == "sddmm":
        return False, "cupyx has no SDDMM operator"
    if device != "cuda":
        return False, f"cupyx cuSPARSE runs on a CUDA GPU, not on {device!r}"
    if _gpu_count() == 0:
        return False, f"cupy {cupy.__version__} sees no CUDA GPU"
    return True, f"cupy {cupy.__version__}, cuSPARSE"


def spmm(A, B: np.ndarray, *, device: str = "cuda"):
    """``A @ B`` with cuSPARSE; inputs are copied to the GPU once, outside timing."""
    ok, reason = available("spmm", device)
    if not ok:
        raise RuntimeError(reason)
    A = canonical_csr(A, B.dtype)
    if B.ndim != 2 or B.shape[0] != A.shape[1]:
        raise ValueError(f"B must have shape ({A.shape[1]}, feat), got {B.shape}")
    A_gpu = cupy_sparse.csr_matrix((cupy.asarray(A.data), cupy.asarray(A.indices), cupy.asarray(A.indptr)),
                                   shape=A.shape)
    B_gpu = cupy.asarray(np.ascontiguousarray(B))
    return lambda: A_gpu @ B_gpu


SPMM_VARIANTS = {"cupy-cusparse": spmm}
SDDMM_VARIANTS: dict = {}

# What the benchmark engine reads: op -> variant name -> factory(A, *inputs, **options) -> run.
VARIANTS = {"spmm": SPMM_VARIANTS, "sddmm": SDDMM_VARIANTS}
