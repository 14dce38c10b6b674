"""DGL baselines (CPU): ``dgl.ops.gspmm`` for SpMM and ``dgl.ops.gsddmm`` for SDDMM.

The graph is a bipartite DGL graph built once from A's non-zeros. SpMM sends ``B[j] * A[i, j]``
along each edge ``j -> i`` and sums at ``i`` (``gspmm(g, "mul", "sum")``). SDDMM takes the dot
product ``X[i] . Y[j]`` on each edge ``i -> j`` (``gsddmm(g, "dot")``) and then multiplies by
``A.data``, timed together, as the contract's op is. DGL is imported through
:mod:`baselines.dgl_import`, which shims what fails under torch 2.13.
"""

from __future__ import annotations

import numpy as np

from baselines.dgl_import import import_dgl
from baselines.scipy_sparse import canonical_csr

try:
    import torch
except ImportError:  # pragma: no cover - torch is a project dependency
    torch = None


def available(op: str = "spmm", device: str = "cpu") -> tuple[bool, str]:
    """Whether DGL imports and can run ``op`` on ``device``, and why not."""
    if op not in ("spmm", "sddmm"):
        raise ValueError(f"unknown op {op!r}; expected 'spmm' or 'sddmm'")
    dgl, reason = import_dgl()
    if dgl is None:
        return False, reason
    if device != "cpu":
        return False, f"dgl {dgl.__version__} from PyPI is built for the CPU only"
    return True, f"dgl {dgl.__version__} ({'gspmm' if op == 'spmm' else 'gsddmm'}) on torch {torch.__version__}"


def _graph(A, source_rows: bool):
    """A's non-zeros as a bipartite graph: ``row -> column`` edges, or ``column -> row``."""
    dgl, reason = import_dgl()
    if dgl is None:
        raise RuntimeError(reason)
    m, n = A.shape
    rows = torch.from_numpy(np.repeat(np.arange(m, dtype=np.int64), np.diff(A.indptr)))
    cols = torch.from_numpy(A.indices.astype(np.int64))
    if source_rows:
        return dgl.heterograph({("row", "nz", "col"): (rows, cols)}, num_nodes_dict={"row": m, "col": n})
    return dgl.heterograph({("col", "nz", "row"): (cols, rows)}, num_nodes_dict={"col": n, "row": m})


def spmm_gspmm(A, B: np.ndarray):
    """``A @ B`` as ``gspmm(g, "mul", "sum", B, A.data)`` on ``column -> row`` edges."""
    A = canonical_csr(A, B.dtype)
    if B.ndim != 2 or B.shape[0] != A.shape[1]:
        raise ValueError(f"B must have shape ({A.shape[1]}, feat), got {B.shape}")
    dgl, _ = import_dgl()
    graph = _graph(A, source_rows=False)
    B_t = torch.from_numpy(np.ascontiguousarray(B))
    weights = torch.from_numpy(A.data)
    return lambda: dgl.ops.gspmm(graph, "mul", "sum", B_t, weights)


def sddmm_gsddmm(A, X: np.ndarray, Y: np.ndarray):
    """``A.data * (X[i] . Y[j])`` as ``gsddmm(g, "dot", X, Y)`` then ``* A.data``, in A's CSR order."""
    A = canonical_csr(A, X.dtype)
    m, n = A.shape
    if X.ndim != 2 or Y.ndim != 2 or len(X) != m or len(Y) != n or X.shape[1] != Y.shape[1]:
        raise ValueError(f"X must be ({m}, k) and Y ({n}, k) with the same k, got {X.shape} and {Y.shape}")
    dgl, _ = import_dgl()
    graph = _graph(A, source_rows=True)
    X_t = torch.from_numpy(np.ascontiguousarray(X))
    Y_t = torch.from_numpy(np.ascontiguousarray(Y))
    values = torch.from_numpy(A.data)
    return lambda: dgl.ops.gsddmm(graph, "dot", X_t, Y_t).view(-1).mul_(values)


SPMM_VARIANTS = {"dgl-gspmm": spmm_gspmm}
SDDMM_VARIANTS = {"dgl-gsddmm": sddmm_gsddmm}

# What the benchmark engine reads: op -> variant name -> factory(A, *inputs, **options) -> run.
VARIANTS = {"spmm": SPMM_VARIANTS, "sddmm": SDDMM_VARIANTS}
