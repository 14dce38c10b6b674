"""cupyx cuSPARSE SpMM baseline (GPU only): ``cupyx.scipy.sparse.csr_matrix @ cupy.ndarray``.

It needs cupy and a CUDA GPU; :func:`probe` (tried once) says which one is missing. cupyx has no
SDDMM operator, so it offers SpMM only.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np

from baselines import Variant
from baselines.scipy_sparse import canonical_csr


@functools.cache
def probe() -> tuple[bool, str]:
    """Whether cupy imports and sees a CUDA GPU (tried once per process), and why not."""
    try:
        cupy = importlib.import_module("cupy")
        importlib.import_module("cupyx.scipy.sparse")
    except ImportError as error:
        return False, f"cupy is not installed ({error}); it needs a CUDA GPU and a cupy-cuda wheel"
    try:
        devices = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # cupy raises its own CUDARuntimeError when no driver is present
        devices = 0
    if devices == 0:
        return False, f"cupy {cupy.__version__} sees no CUDA GPU"
    return True, f"cupy {cupy.__version__}, cuSPARSE"


def spmm(A, B: np.ndarray, *, device: str = "cuda"):
    """``A @ B`` with cuSPARSE; inputs are copied to the GPU once, outside timing."""
    ok, reason = probe()
    if not ok:
        raise RuntimeError(reason)
    cupy, cupy_sparse = importlib.import_module("cupy"), importlib.import_module("cupyx.scipy.sparse")
    A = canonical_csr(A, B.dtype)
    if B.ndim != 2 or B.shape[0] != A.shape[1]:
        raise ValueError(f"B must have shape ({A.shape[1]}, feat), got {B.shape}")
    A_gpu = cupy_sparse.csr_matrix((cupy.asarray(A.data), cupy.asarray(A.indices), cupy.asarray(A.indptr)),
                                   shape=A.shape)
    B_gpu = cupy.asarray(np.ascontiguousarray(B))
    return lambda: A_gpu @ B_gpu


VARIANTS = {"spmm": {"cupy-cusparse": Variant(spmm, devices=("cuda",), library_reference=True)}}
