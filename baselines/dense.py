"""Dense matmul baseline: ``torch.mm`` on the densified A (MKL on the CPU, cuBLAS on a GPU).

Only SpMM has a dense form here. Dense A takes ``m * n * itemsize`` bytes; beyond
``DENSE_LIMIT_BYTES`` (or the ``limit_bytes`` a caller passes) the factory refuses with a
``ValueError``, so the row says why instead of exhausting memory or time.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from baselines import Variant
from baselines.scipy_sparse import canonical_csr
from baselines.torch_sparse import check_device, dense_tensor, torch

DENSE_LIMIT_BYTES = 2 << 30


def _backend(device: str) -> tuple[bool, str]:
    return True, f"torch {torch.__version__} dense mm ({'cuBLAS' if device == 'cuda' else 'MKL/ATen'})"


def spmm_dense(A, B: np.ndarray, *, device: str = "cpu", limit_bytes: int | None = None):
    """``torch.mm(A_dense, B, out=C)``; ``ValueError`` when dense A exceeds the limit."""
    limit = DENSE_LIMIT_BYTES if limit_bytes is None else int(limit_bytes)
    m, n = A.shape
    dense_bytes = m * n * np.dtype(B.dtype).itemsize
    if dense_bytes > limit:
        raise ValueError(f"dense A would take {dense_bytes / 2**30:.2f} GiB, over the {limit / 2**30:.2f} GiB limit")
    A_t = torch.from_numpy(canonical_csr(A, B.dtype).toarray())
    if device != "cpu":
        A_t = A_t.to(check_device(device))
    B_t = dense_tensor(B, n, device)
    out = torch.empty((m, B_t.shape[1]), dtype=B_t.dtype, device=device)
    return lambda: torch.mm(A_t, B_t, out=out)


DENSE = Variant(spmm_dense, check=_backend)
# Only SpMM has a dense form here (a dense SDDMM would compute all m x n dot products). For PrunedBERT
# (a pruned weight times the activations) dense MKL / cuBLAS is the reference.
VARIANTS = {"spmm": {"torch-dense": DENSE},
            "prunedbert": {"torch-dense": dataclasses.replace(DENSE, reference_on=("cpu", "cuda"))}}
