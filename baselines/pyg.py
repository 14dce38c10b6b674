"""PyG (``torch_geometric``) SpMM baselines: ``EdgeIndex`` matmul and ``utils.spmm``.

- ``pyg-edgeindex``: ``EdgeIndex(edge_index, sparse_size, sort_order="row").matmul(B,
  input_value=A.data)``, the sparse-aware tensor PyG's layers use.
- ``pyg-spmm``: ``torch_geometric.utils.spmm(A_csr, B, reduce="sum")`` on a torch CSR tensor.

PyG has no SDDMM operator, so it offers SpMM only.
"""

from __future__ import annotations

import warnings

import numpy as np

from baselines.scipy_sparse import canonical_csr
from baselines.torch_sparse import check_device, csr_tensor, dense_tensor

try:
    import torch
    import torch_geometric
    from torch_geometric import EdgeIndex
    from torch_geometric.utils import spmm as _pyg_spmm
except ImportError as error:
    torch_geometric = None
    _IMPORT_ERROR = f"torch_geometric is not importable ({error}); install the bench extra"
else:
    _IMPORT_ERROR = None


def available(op: str = "spmm", device: str = "cpu") -> tuple[bool, str]:
    """Whether PyG can run ``op`` on ``device``, and why not."""
    if op not in ("spmm", "sddmm"):
        raise ValueError(f"unknown op {op!r}; expected 'spmm' or 'sddmm'")
    if torch_geometric is None:
        return False, _IMPORT_ERROR
    if op == "sddmm":
        return False, f"torch_geometric {torch_geometric.__version__} has no SDDMM operator"
    try:
        check_device(device)
    except RuntimeError as error:
        return False, str(error)
    return True, f"torch_geometric {torch_geometric.__version__} on torch {torch.__version__}"


def spmm_edge_index(A, B: np.ndarray, *, device: str = "cpu"):
    """``EdgeIndex.matmul(B, input_value=A.data)`` with a row-sorted edge index."""
    A = canonical_csr(A, B.dtype)
    m, n = A.shape
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(A.indptr))
    index = torch.from_numpy(np.stack([rows, A.indices.astype(np.int64)]))
    values = torch.from_numpy(A.data)
    if device != "cpu":
        index, values = index.to(check_device(device)), values.to(device)
    edge_index = EdgeIndex(index, sparse_size=(m, n), sort_order="row")
    B_t = dense_tensor(B, n, device)

    def run():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
            warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
            return edge_index.matmul(B_t, input_value=values)

    return run


def spmm_utils(A, B: np.ndarray, *, device: str = "cpu"):
    """``torch_geometric.utils.spmm(A_csr, B, reduce="sum")``."""
    A_t = csr_tensor(A, B.dtype, device=device)
    B_t = dense_tensor(B, A_t.shape[1], device)
    return lambda: _pyg_spmm(A_t, B_t, reduce="sum")


SPMM_VARIANTS = {"pyg-edgeindex": spmm_edge_index, "pyg-spmm": spmm_utils}
SDDMM_VARIANTS: dict = {}

# What the benchmark engine reads: op -> variant name -> factory(A, *inputs, **options) -> run.
VARIANTS = {"spmm": SPMM_VARIANTS, "sddmm": SDDMM_VARIANTS}
