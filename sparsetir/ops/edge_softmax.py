"""Edge softmax and aggregation, fused: GAT's attention as one op, composed from Stage I.

For a CSR structure ``adj_t`` (row ``i`` = target, stored column ``j`` = source; repeated entries
are separate edges) and ``H`` heads::

    z[e, h]     = leaky_relu(a_src[j, h] + a_dst[i, h], negative_slope)    e = (i, j)
    alpha[e, h] = exp(z[e, h] - max_row(z)) / sum_row exp(z - max_row(z))  (softmax over row i)
    out[i, h]   = sum_{e = (i, j)} alpha[e, h] * mask[e, h] * x[j, h, :]

``mask`` is attention dropout (zeros and ``1 / (1 - p)``, drawn by the caller), or none. A row
without entries gives zeros. The op returns ``out (m, H, F)`` and ``alpha (nnz, H)`` (in CSR
order, before dropout: what PyG's ``return_attention_weights`` reports). Only ``alpha`` is kept
per edge, ``H`` wide; no per-edge tensor of width ``H x F`` (PyG's gathered messages) exists.

Stage I (one function, ``edge_softmax_function``; ``mx`` and ``sm`` are intermediates)::

    mx[i, h]  = max(mx[i, h], z)                    over [I, J, H]     "SRS"
    sm[i, h] += exp(z - mx[i, h])                   over [I, J, H]     "SRS"
    P[i, j, h] = exp(z - mx[i, h]) / sm[i, h]       over [I, J, H]     "SSS"
    O[i, h, f] += P[i, j, h] (* Mk[i, j, h]) * X[j, h, f]   over [I, J, H, F]  "SRSS"

Backward (``q = alpha * mask``, ``rd[i, h] = dout[i, h] . out[i, h]``), two functions: over the
rows (``edge_softmax_backward_function``)::

    dq[e, h]     = dout[i, h] . x[j, h]                       (an SDDMM per head)
    dz[e, h]     = alpha (mask dq - rd[i, h]) * (1 if z > 0 else negative_slope)
    da_dst[i, h] = sum_row dz

and over the columns, on the transposed structure (``edge_aggregate_function``, the entries'
``q`` and ``dz`` permuted into its order)::

    dx[j, h, f]  = sum_{e = (i, j)} q[e, h] dout[i, h, f]
    da_src[j, h] = sum_{e = (i, j)} dz[e, h]

``torch.ops.sparsetir.edge_softmax_aggregate`` (with autograd and a fake kernel) is what
``sparsetir.nn.GATConv`` calls; :func:`edge_softmax_aggregate` is its user-level form. The
kernels are compiled once per (heads, features, slope, dropout, dtype, target), for symbolic
sizes: one library serves every graph. A structure is validated once (cached with the SpMM
op's structures, ``torch_ops``), then kernels run without re-validation.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from ..ir import (
    SparseBuffer,
    SparseFunction,
    cast,
    dense_fixed,
    exp,
    size_vars,
    sparse_iteration,
    sparse_variable,
    where,
)
from ..ir import max as ir_max
from ..runtime.edge_softmax import EdgeSoftmaxKernels, EdgeSoftmaxStructure, function_spec
from ..runtime.edge_softmax import backward as runtime_backward
from ..runtime.edge_softmax import forward as runtime_forward
from . import torch_ops

__all__ = ["edge_aggregate_function", "edge_softmax_aggregate", "edge_softmax_backward_function",
           "edge_softmax_function", "edge_softmax_kernel", "edge_softmax_kernels"]

TORCH_EXPORTS = ("edge_softmax_aggregate",)  # re-exported by sparsetir.ops (no OpSpec: CSR only, nothing to tune)
DTYPES = ("float32", "float64")
_DERIVED = "edge_softmax"  # this module's entry in a cached structure's ``extras``
_COMPILED: dict = {}
_LOCK = threading.Lock()


# ------------------------------------------------------------------------------------------ Stage I
def _axes(heads: int, feat: int, idtype: str):
    m, n, nnz = size_vars("m n nnz", idtype)
    rows = dense_fixed("I", m, idtype)
    cols = sparse_variable("J", rows, n, nnz, idtype)
    dense_cols = dense_fixed("J_", n, idtype)
    return rows, cols, dense_cols, dense_fixed("H", heads, idtype), dense_fixed("F", feat, idtype)


def _leaky(z, slope, dtype):
    return where(z > cast(0.0, dtype), z, z * cast(slope, dtype))


def edge_softmax_function(heads: int, feat: int, *, negative_slope: float = 0.2, dropout: bool = False,
                          dtype: str = "float32", idtype: str = "int64") -> SparseFunction:
    """The forward Stage I function (module docstring): parameters ``X (n, H, F)``, ``As (n, H)``,
    ``Ad (m, H)``, ``P (nnz, H)`` (alpha, written), ``O (m, H, F)`` (written) and, with
    ``dropout``, ``Mk (nnz, H)``; the structure is ``J_indptr``/``J_indices``."""
    I, J, J_, H, F = _axes(heads, feat, idtype)
    X, As, Ad = SparseBuffer("X", (J_, H, F), dtype), SparseBuffer("As", (J_, H), dtype), SparseBuffer("Ad", (I, H), dtype)
    P, Mk = SparseBuffer("P", (I, J, H), dtype), SparseBuffer("Mk", (I, J, H), dtype)
    O = SparseBuffer("O", (I, H, F), dtype)
    mx, sm = SparseBuffer("mx", (I, H), dtype), SparseBuffer("sm", (I, H), dtype)

    def score(i, j, h):
        return _leaky(As[j, h] + Ad[i, h], negative_slope, dtype)

    @sparse_iteration([I, J, H], "SRS", name="row_max")
    def row_max(i, j, h):
        mx[i, h] = ir_max(mx[i, h], score(i, j, h))

    @sparse_iteration([I, J, H], "SRS", name="row_sum")
    def row_sum(i, j, h):
        sm[i, h] += exp(score(i, j, h) - mx[i, h])

    @sparse_iteration([I, J, H], "SSS", name="alpha")
    def alpha(i, j, h):
        P[i, j, h] = exp(score(i, j, h) - mx[i, h]) / sm[i, h]

    @sparse_iteration([I, J, H, F], "SRSS", name="aggregate")
    def aggregate(i, j, h, f):
        weight = P[i, j, h] * Mk[i, j, h] if dropout else P[i, j, h]
        O[i, h, f] += weight * X[j, h, f]

    params = [X, As, Ad, P, O] + ([Mk] if dropout else [])
    return SparseFunction("edge_softmax", [row_max, row_sum, alpha, aggregate], params=params)


def edge_softmax_backward_function(heads: int, feat: int, *, negative_slope: float = 0.2, dropout: bool = False,
                                   dtype: str = "float32", idtype: str = "int64") -> SparseFunction:
    """The backward over rows: ``dO, X, O, P, As, Ad`` (and ``Mk``) in, ``DZ (nnz, H)`` (the scores'
    gradient) and ``DAd (m, H)`` out; ``rd`` and ``DQ`` are intermediates."""
    I, J, J_, H, F = _axes(heads, feat, idtype)
    dO, O = SparseBuffer("dO", (I, H, F), dtype), SparseBuffer("O", (I, H, F), dtype)
    X, As, Ad = SparseBuffer("X", (J_, H, F), dtype), SparseBuffer("As", (J_, H), dtype), SparseBuffer("Ad", (I, H), dtype)
    P, Mk = SparseBuffer("P", (I, J, H), dtype), SparseBuffer("Mk", (I, J, H), dtype)
    DQ, DZ = SparseBuffer("DQ", (I, J, H), dtype), SparseBuffer("DZ", (I, J, H), dtype)
    rd, DAd = SparseBuffer("rd", (I, H), dtype), SparseBuffer("DAd", (I, H), dtype)

    @sparse_iteration([I, H, F], "SSR", name="row_dot")
    def row_dot(i, h, f):
        rd[i, h] += dO[i, h, f] * O[i, h, f]

    @sparse_iteration([I, J, H, F], "SSSR", name="edge_dot")
    def edge_dot(i, j, h, f):
        DQ[i, j, h] += dO[i, h, f] * X[j, h, f]

    @sparse_iteration([I, J, H], "SSS", name="score_grad")
    def score_grad(i, j, h):
        dq = DQ[i, j, h] * Mk[i, j, h] if dropout else DQ[i, j, h]
        z = As[j, h] + Ad[i, h]
        DZ[i, j, h] = P[i, j, h] * (dq - rd[i, h]) * where(z > cast(0.0, dtype), cast(1.0, dtype),
                                                            cast(negative_slope, dtype))

    @sparse_iteration([I, J, H], "SRS", name="target_grad")
    def target_grad(i, j, h):
        DAd[i, h] += DZ[i, j, h]

    params = [dO, X, O, P, As, Ad, DZ, DAd] + ([Mk] if dropout else [])
    return SparseFunction("edge_softmax_backward", [row_dot, edge_dot, score_grad, target_grad], params=params)


def edge_aggregate_function(heads: int, feat: int, *, dtype: str = "float32", idtype: str = "int64") -> SparseFunction:
    """The backward over columns, run on the transposed structure: ``W (nnz, H)`` and ``Z (nnz, H)``
    per entry, ``B (n, H, F)`` in; ``C[i, h] = sum_j W B[j, h]`` and ``S[i, h] = sum_j Z`` out."""
    I, J, J_, H, F = _axes(heads, feat, idtype)
    W, Z = SparseBuffer("W", (I, J, H), dtype), SparseBuffer("Z", (I, J, H), dtype)
    B, C, S = SparseBuffer("B", (J_, H, F), dtype), SparseBuffer("C", (I, H, F), dtype), SparseBuffer("S", (I, H), dtype)

    @sparse_iteration([I, J, H, F], "SRSS", name="aggregate")
    def aggregate(i, j, h, f):
        C[i, h, f] += W[i, j, h] * B[j, h, f]

    @sparse_iteration([I, J, H], "SRS", name="score_sum")
    def score_sum(i, j, h):
        S[i, h] += Z[i, j, h]

    return SparseFunction("edge_aggregate", [aggregate, score_sum], params=[W, Z, B, C, S])


FUNCTIONS = {"forward": edge_softmax_function, "backward": edge_softmax_backward_function,
             "aggregate": edge_aggregate_function}


def edge_softmax_kernel(kind: str, heads: int, feat: int, *, negative_slope: float = 0.2, dropout: bool = False,
                        dtype: str = "float32", target="llvm", idtype: str = "int64"):
    """The compiled function of ``kind`` (``"forward"``, ``"backward"`` or ``"aggregate"``), built
    once per process and key (and cached on disk by ``sparsetir.build``)."""
    from ..backend import build  # noqa: PLC0415 - the compiler loads on first use

    if dtype not in DTYPES:
        raise TypeError(f"edge_softmax_aggregate runs in {', '.join(DTYPES)}, not {dtype}")
    options = {} if kind == "aggregate" else {"negative_slope": float(negative_slope), "dropout": bool(dropout)}
    key = (kind, heads, feat, json.dumps(options, sort_keys=True), dtype, idtype,
           json.dumps(target, sort_keys=True) if isinstance(target, dict) else target)
    with _LOCK:
        if key not in _COMPILED:
            _COMPILED[key] = build(FUNCTIONS[kind](heads, feat, dtype=dtype, idtype=idtype, **options), target)
        return _COMPILED[key]


def edge_softmax_kernels(heads: int, feat: int, *, negative_slope: float = 0.2, dropout: bool = False,
                         dtype: str = "float32", target="llvm") -> EdgeSoftmaxKernels:
    """The three compiled functions of one key as a set that runs and exports without the compiler
    (``runtime.edge_softmax``: ``export_kernels``, ``load_kernels``, ``edge_softmax_aggregate``)."""
    options = {"negative_slope": float(negative_slope), "dropout": bool(dropout)}
    functions = {kind: edge_softmax_kernel(kind, heads, feat, dtype=dtype, target=target,
                                           **({} if kind == "aggregate" else options)) for kind in FUNCTIONS}
    spec = function_spec("forward", heads, feat, dtype=dtype, **options)  # checks kind, casts the options
    return EdgeSoftmaxKernels(functions, spec["heads"], spec["feat"], spec["negative_slope"], spec["dropout"], dtype)


# ------------------------------------------------------------------------------------------ torch
def _checks(indptr: Tensor, indices: Tensor, x: Tensor, a_src: Tensor, a_dst: Tensor, mask: Tensor | None,
            negative_slope: float) -> tuple[int, int, int]:
    """``(m, heads, features)`` after checking every operand (the real and the fake kernel run this)."""
    if x.dim() != 3:
        raise ValueError(f"x must be (sources, heads, features), got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"x has dtype {x.dtype}; edge_softmax_aggregate runs in float32 and float64")
    n, heads, _feat = x.shape
    torch_ops._check_structure(indptr, indices, indices.new_empty((indices.shape[0],), dtype=x.dtype), n)
    m = indptr.shape[0] - 1
    for name, tensor, rows in (("a_src", a_src, n), ("a_dst", a_dst, m)) + ((("mask", mask, indices.shape[0]),)
                                                                            if mask is not None else ()):
        if tensor.dim() != 2 or tuple(tensor.shape) != (rows, heads):
            raise ValueError(f"{name} must be ({rows}, {heads}), got shape {tuple(tensor.shape)}")
        if tensor.dtype != x.dtype:
            raise TypeError(f"{name} has dtype {tensor.dtype}, x {x.dtype}: they must match")
    if not (isinstance(negative_slope, (int, float)) and np.isfinite(negative_slope)):
        raise ValueError(f"negative_slope must be a finite number, got {negative_slope!r}")
    torch_ops._check_devices(indptr, indices, x, a_src, a_dst, *(() if mask is None else (mask,)))
    return m, heads, int(x.shape[2])


def _derived(record) -> EdgeSoftmaxStructure:
    """The structure as the kernels take it (int64 on its device) and its transpose, built once."""
    info = record.extras.get(_DERIVED)
    if info is None:
        matrix = record.matrix
        transposed, order = torch_ops._transposed(record)
        info = EdgeSoftmaxStructure.from_csr(matrix.indptr, matrix.indices, matrix.shape[1], record.device,
                                             transposed=(transposed.indptr, transposed.indices, order.cpu()))
        record.extras[_DERIVED] = info
    return info


class _Compiled(Mapping):
    """The op's functions of one key by kind, compiled on first use (``edge_softmax_kernel``): what
    ``runtime.edge_softmax.forward``/``backward`` call."""

    def __init__(self, heads: int, feat: int, dtype: torch.dtype, device, target: str, negative_slope: float,
                 dropout: bool):
        self.key = (heads, feat)
        self.options = {"dtype": str(dtype).replace("torch.", ""), "target": torch_ops._target_of(target, device),
                        "negative_slope": negative_slope, "dropout": dropout}

    def __getitem__(self, kind: str):
        return edge_softmax_kernel(kind, *self.key, **self.options)

    def __iter__(self):
        return iter(FUNCTIONS)

    def __len__(self) -> int:
        return len(FUNCTIONS)


def _contiguous(*tensors):
    return tuple(None if t is None else t.detach().contiguous() for t in tensors)


@torch.library.custom_op("sparsetir::edge_softmax_aggregate", mutates_args=())
def _edge_softmax_aggregate(indptr: Tensor, indices: Tensor, x: Tensor, a_src: Tensor, a_dst: Tensor,
                            mask: Optional[Tensor], negative_slope: float = 0.2,  # noqa: UP045 - torch.library's schema
                            target: str = "") -> tuple[Tensor, Tensor]:
    _m, heads, feat = _checks(indptr, indices, x, a_src, a_dst, mask, negative_slope)
    structure = _derived(torch_ops._structure(indptr, indices, int(x.shape[0])))
    x, a_src, a_dst, mask = _contiguous(x, a_src, a_dst, mask)
    functions = _Compiled(heads, feat, x.dtype, x.device, target, negative_slope, mask is not None)
    return runtime_forward(functions, structure, x, a_src, a_dst, mask)


@_edge_softmax_aggregate.register_fake
def _edge_softmax_aggregate_fake(indptr, indices, x, a_src, a_dst, mask, negative_slope=0.2, target=""):
    m, heads, feat = _checks(indptr, indices, x, a_src, a_dst, mask, negative_slope)
    return x.new_empty((m, heads, feat)), x.new_empty((indices.shape[0], heads))


@torch.library.custom_op("sparsetir::edge_softmax_aggregate_backward", mutates_args=())
def _edge_softmax_aggregate_backward(indptr: Tensor, indices: Tensor, x: Tensor, a_src: Tensor, a_dst: Tensor,
                                     mask: Optional[Tensor], out: Tensor, alpha: Tensor,  # noqa: UP045
                                     grad: Tensor, negative_slope: float = 0.2,
                                     target: str = "") -> tuple[Tensor, Tensor, Tensor]:
    _m, heads, feat = _checks(indptr, indices, x, a_src, a_dst, mask, negative_slope)
    structure = _derived(torch_ops._structure(indptr, indices, int(x.shape[0])))
    x, a_src, a_dst, mask, out, alpha, grad = _contiguous(x, a_src, a_dst, mask, out, alpha, grad.to(x.dtype))
    functions = _Compiled(heads, feat, x.dtype, x.device, target, negative_slope, mask is not None)
    return runtime_backward(functions, structure, x, a_src, a_dst, mask, out, alpha, grad)


@_edge_softmax_aggregate_backward.register_fake
def _edge_softmax_aggregate_backward_fake(indptr, indices, x, a_src, a_dst, mask, out, alpha, grad,
                                          negative_slope=0.2, target=""):
    m, heads, _feat = _checks(indptr, indices, x, a_src, a_dst, mask, negative_slope)
    return torch.empty_like(x), torch.empty_like(a_src), x.new_empty((m, heads))


def _setup(ctx, inputs, output):
    indptr, indices, x, a_src, a_dst, mask, negative_slope, target = inputs
    out, alpha = output
    ctx.save_for_backward(indptr, indices, x, a_src, a_dst, mask, out, alpha)
    ctx.options = (negative_slope, target)
    ctx.mark_non_differentiable(alpha)


def _backward(ctx, grad_out, _grad_alpha):
    indptr, indices, x, a_src, a_dst, mask, out, alpha = ctx.saved_tensors
    negative_slope, target = ctx.options
    if grad_out is None:
        return None, None, None, None, None, None, None, None
    d_x, d_src, d_dst = torch.ops.sparsetir.edge_softmax_aggregate_backward(
        indptr, indices, x, a_src, a_dst, mask, out, alpha, grad_out.contiguous(), negative_slope, target)
    needs = ctx.needs_input_grad
    return (None, None, d_x if needs[2] else None, d_src if needs[3] else None, d_dst if needs[4] else None, None,
            None, None)


_edge_softmax_aggregate.register_autograd(_backward, setup_context=_setup)


def edge_softmax_aggregate(indptr: Tensor, indices: Tensor, x: Tensor, a_src: Tensor, a_dst: Tensor, *,
                           negative_slope: float = 0.2, mask: Tensor | None = None,
                           target=None) -> tuple[Tensor, Tensor]:
    """GAT's attention over a CSR structure, fused (module docstring); differentiable in ``x``,
    ``a_src`` and ``a_dst``.

    Parameters
    ----------
    indptr, indices : Tensor
        ``adj_t`` in CSR (row = target, column = source), integer tensors on x's device.
    x : Tensor
        ``(sources, heads, features)``, float32 or float64.
    a_src, a_dst : Tensor
        ``(sources, heads)`` and ``(targets, heads)``: each node's part of the edge score.
    negative_slope : float
        The leaky ReLU's slope for negative scores.
    mask : Tensor, optional
        ``(nnz, heads)``: multiplies each attention weight (dropout: zeros and ``1 / (1 - p)``).
    target : str or dict, optional
        ``"llvm"``, ``"cuda"`` or a target dict (default: from x's device).

    Returns
    -------
    (out, alpha)
        ``out (targets, heads, features)`` and ``alpha (nnz, heads)``, the softmax weights in CSR
        order before ``mask``.
    """
    target_text = "" if target is None else (target if isinstance(target, str) else json.dumps(target, sort_keys=True))
    return torch.ops.sparsetir.edge_softmax_aggregate(indptr, indices, x, a_src, a_dst, mask, float(negative_slope),
                                                      target_text)
