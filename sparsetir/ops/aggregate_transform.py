"""Aggregate and transform as one op: ``Y = Â X W^T (+ X[:m] W_root^T) (+ bias)``, GraphSAGE's layer.

``Â`` is ``adj_t`` in CSR (``m`` targets, ``n = num_cols`` sources; row ``i`` = a target) with
either per-entry ``values`` or a row ``scale`` (a mean's ``1 / degree``; neither: ones), ``X`` the
``(n, f_in)`` source features, ``W`` the ``(f_out, f_in)`` weight of an ``nn.Linear``. The root
term multiplies the first ``m`` rows of ``X`` (a graph, or a sampled block: its targets lead its
sources). Importing ``sparsetir.ops`` registers ``torch.ops.sparsetir.aggregate_transform`` with
``torch.library``, with a fake kernel and autograd::

    aggregate_transform(indptr, indices, values, scale, X, W, W_root, bias, num_cols, format="csr",
                        keep=None, p=0.0)
        -> (Y, H): Y (m, f_out); H = Â X (m, f_in) when the op aggregated first (kept for the
           backward), else an empty (0, f_in) tensor

The forward runs in the cheaper order (:func:`projects_first`, from the sizes and ``nnz``, as
PyG's ``SAGEConv`` leaves to its user's ``project``): aggregate first, ``Y = H W^T``, or project
first, ``Y = Â (X W^T)``, aggregating ``f_out`` features instead of ``f_in``. The backward
chooses its own order (:func:`backward_aggregates`) between ``dX = Â^T (dY W)``, ``dW = dY^T H``
and ``dP = Â^T dY``, ``dX = dP W``, ``dW = dP^T X``, counting which gradients are needed and
whether ``H`` was kept. The sparse products are the existing kernels: ``spmm_row_scaled`` and its
gradient ``spmm_column_scaled`` (no value array), or ``spmm`` (values, any format) with its
``transpose_a``; the dense products are torch's GEMM (``addmm``, the root term accumulated into
the same output by ``addmm_``). The gradient in ``values`` is an SDDMM (``dvalues[e] = (dY W)[i]
. X[j]``); a row ``scale`` is not differentiable (it is a structure's ``1 / degree``).

**Input dropout** (``keep``, ``p``): the op computes the layer of ``X' = X * keep / (1 - p)``,
``keep`` a bool mask of X's shape (``torch.nn.functional.dropout``'s, drawn by the caller). Where
it aggregates first over a CSR structure with a row scale (a mean, or a sum) and that spares more
than it costs (:func:`masks_in_kernel`: a sampled block, whose sources outnumber its targets), the
mask is read inside the SpMM as X's rows are gathered (``ops.aggregate``'s ``rows_masked``, the
``1 / (1 - p)`` folded into the row scale), and the backward's ``Â^T dH`` masks its result in the
same reduction (``columns_masked``): only the root term's ``m`` rows of ``X'`` are made, never
its ``n`` source rows. Elsewhere (values, other formats, projecting first) ``X'`` is made once
and the op runs on it, its gradient masked once. ``p = 0`` with no mask is the plain layer.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import (
    torch_aggregate,  # registers spmm_row_scaled / spmm_column_scaled; the masked products
    torch_ops,
)

__all__ = ["COPY_BYTES", "GATHER_COST", "aggregate_transform", "backward_aggregates", "masks_in_kernel", "projects_first"]

TORCH_EXPORTS = ("aggregate_transform",)  # re-exported by sparsetir.ops (a torch op: no OpSpec)

#: How much more a multiply-add of an SpMM (a gathered row) costs than one of a dense matrix product,
#: for choosing the order of a product ``Â X W^T``.
GATHER_COST = 3


def projects_first(sources: int, targets: int, edges: int, in_features: int, out_features: int,
                   sparse_inputs: bool = False) -> bool:
    """Whether ``Â (X W^T)`` is cheaper than ``(Â X) W^T``: the first multiplies every source row by
    W and aggregates ``out_features``; the second aggregates ``in_features`` and multiplies the
    target rows only. For a graph (sources = targets) it is ``out_features < in_features``."""
    if sparse_inputs:  # aggregating first would densify the features
        return True
    project = sources * in_features * out_features + GATHER_COST * edges * out_features
    aggregate = GATHER_COST * edges * in_features + targets * in_features * out_features
    return project < aggregate


def backward_aggregates(sources: int, targets: int, edges: int, in_features: int, out_features: int, *,
                        kept: bool, need_x: bool = True, need_w: bool = True, need_values: bool = False) -> bool:
    """Whether the backward of ``Y = Â X W^T`` is cheaper as ``dH = dY W``, ``dX = Â^T dH``, ``dW =
    dY^T H`` (True; ``kept``: the forward kept ``H = Â X``, else it is aggregated again) than as
    ``dP = Â^T dY``, ``dX = dP W``, ``dW = dP^T X`` (False), for the gradients needed. The values'
    gradient needs ``dH`` in either order."""
    n, m, e, a, b = sources, targets, edges, in_features, out_features
    d_h = m * a * b if (need_x or need_values) else 0
    aggregate = d_h + (GATHER_COST * e * a if need_x else 0) + (m * a * b + (0 if kept else GATHER_COST * e * a)
                                                                 if need_w else 0)
    project = ((GATHER_COST * e * b if (need_x or need_w) else 0) + (n * a * b if need_x else 0)
               + (n * a * b if need_w else 0) + (m * a * b if need_values else 0))
    return aggregate <= project


# --- the sparse products: Â B and Â^T G with the kernels that exist ----------------------------

def _weights(indptr: Tensor, indices: Tensor, values: Tensor | None, scale: Tensor | None, dtype) -> Tensor:
    """Â's per-entry values: the given ones, or each row's scale repeated over its entries."""
    if values is not None:
        return values
    degree = indptr[1:] - indptr[:-1]
    return torch.repeat_interleave(scale, degree.to(torch.int64), output_size=indices.shape[0]).to(dtype)


def _rows_scale(indptr: Tensor, scale: Tensor | None, dtype) -> Tensor:
    return scale if scale is not None else torch.ones(indptr.shape[0] - 1, dtype=dtype, device=indptr.device)


def _aggregate(indptr, indices, values, scale, B: Tensor, num_cols: int, fmt: str) -> Tensor:
    """``Â B`` (m rows)."""
    if values is None and fmt.strip().lower() == "csr":
        return torch.ops.sparsetir.spmm_row_scaled(indptr, indices, B, _rows_scale(indptr, scale, B.dtype), num_cols)
    return torch.ops.sparsetir.spmm(indptr, indices, _weights(indptr, indices, values, scale, B.dtype), B, num_cols,
                                    False, fmt)


def _aggregate_transposed(indptr, indices, values, scale, G: Tensor, num_cols: int, fmt: str) -> Tensor:
    """``Â^T G`` (num_cols rows)."""
    if values is None and fmt.strip().lower() == "csr":
        return torch.ops.sparsetir.spmm_column_scaled(indptr, indices, G, _rows_scale(indptr, scale, G.dtype),
                                                      num_cols)
    return torch.ops.sparsetir.spmm(indptr, indices, _weights(indptr, indices, values, scale, G.dtype), G, num_cols,
                                    True, fmt)


# --- checks (the real and fake kernels both run them) ---------------------------------------------

def _dropout_checks(X, keep, p) -> None:
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"p must be a float, got {type(p).__name__}")
    if keep is None:
        if p != 0.0:
            raise ValueError(f"p={p!r} needs the dropout's keep mask (keep=)")
        return
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p!r}")
    if not isinstance(keep, Tensor) or keep.dtype != torch.bool:
        raise TypeError(f"keep must be a bool tensor (the entries of X kept), got "
                        f"{keep.dtype if isinstance(keep, Tensor) else type(keep).__name__}")
    if keep.shape != X.shape:
        raise ValueError(f"keep must have X's shape {tuple(X.shape)}, got {tuple(keep.shape)}")
    torch_ops._check_devices(X, keep)


def _checks(indptr, indices, values, scale, X, W, W_root, bias, num_cols, keep=None, p=0.0) -> tuple[int, int, int]:
    """(m, f_in, f_out) after checking every operand; ValueError/TypeError naming the one at fault."""
    torch_ops._check_dense(X, "X", X.shape[0] if X.dim() == 2 else -1, "")
    torch_ops._check_structure(indptr, indices, values if values is not None else X.new_empty((indices.shape[0],)),
                               num_cols)
    torch_ops._check_dense(X, "X", num_cols, "one row per source: per column of adj_t")
    rows, f_in = int(indptr.shape[0]) - 1, int(X.shape[1])
    if values is not None and scale is not None:
        raise ValueError("give the structure's values or a row scale, not both")
    if W.dim() != 2 or W.shape[1] != f_in:
        raise ValueError(f"W must be (out_features, {f_in}) for X with {f_in} features, got {tuple(W.shape)}")
    f_out = int(W.shape[0])
    tensors = [("W", W)] + [(name, t) for name, t in (("values", values), ("scale", scale), ("W_root", W_root),
                                                       ("bias", bias)) if t is not None]
    for name, tensor in tensors:
        if tensor.dtype != X.dtype:
            raise TypeError(f"{name} has dtype {tensor.dtype}, X has {X.dtype}: they must match")
    if scale is not None and (scale.dim() != 1 or scale.shape[0] != rows):
        raise ValueError(f"scale must be ({rows},), one per row of adj_t, got {tuple(scale.shape)}")
    if W_root is not None:
        if tuple(W_root.shape) != (f_out, f_in):
            raise ValueError(f"W_root must be ({f_out}, {f_in}) like W, got {tuple(W_root.shape)}")
        if rows > num_cols:
            raise ValueError(f"the root term multiplies X's first {rows} rows (the targets lead the sources), but X "
                             f"has {num_cols}")
    if bias is not None and tuple(bias.shape) != (f_out,):
        raise ValueError(f"bias must be ({f_out},), got {tuple(bias.shape)}")
    torch_ops._check_devices(indptr, indices, X, W, *(t for _, t in tensors))
    _dropout_checks(X, keep, p)
    return rows, f_in, f_out


def _order(indptr, indices, X, W) -> bool:
    """True where the forward projects first."""
    return projects_first(int(X.shape[0]), int(indptr.shape[0]) - 1, int(indices.shape[0]), int(W.shape[1]),
                          int(W.shape[0]))


#: Bytes an entry of the dropped copy of X costs (written once, read back once, float32) against the one
#: byte of mask a gathered entry reads when the mask is applied inside the SpMM.
COPY_BYTES = 8


def masks_in_kernel(indptr, indices, values, X, W, fmt: str, keep, root: bool) -> bool:
    """Whether the forward reads the dropout mask inside its SpMM (aggregating first over a CSR
    structure with a row scale) rather than making the dropped copy of X first: where the rows of
    the copy it spares (every source, less the targets the root term needs) cost more than the
    mask bytes its gathers read (one an entry): a sampled block (sources several times its
    targets), not a graph with a root term (every row is needed anyway)."""
    if keep is None or values is not None or fmt.strip().lower() != "csr" or _order(indptr, indices, X, W):
        return False
    spared = int(X.shape[0]) - (int(indptr.shape[0]) - 1 if root else 0)
    return COPY_BYTES * spared > int(indices.shape[0])


def _dropped(X: Tensor, keep: Tensor, p: float) -> Tensor:
    """``X * keep / (1 - p)``, as ``torch.nn.functional.dropout`` computes it (a NaN dropped stays NaN)."""
    return X.mul(keep).mul_(1.0 / (1.0 - p))


# --- the op ---------------------------------------------------------------------------------------

@torch.library.custom_op("sparsetir::aggregate_transform", mutates_args=())
def _aggregate_transform(indptr: Tensor, indices: Tensor,
                         values: Optional[Tensor], scale: Optional[Tensor],  # noqa: UP045 - torch.library's schema
                         X: Tensor, W: Tensor,
                         W_root: Optional[Tensor], bias: Optional[Tensor],  # noqa: UP045 - torch.library's schema
                         num_cols: int, format: str = "csr",
                         keep: Optional[Tensor] = None, p: float = 0.0,  # noqa: UP045 - torch.library's schema
                         ) -> tuple[Tensor, Tensor]:
    rows, f_in, _f_out = _checks(indptr, indices, values, scale, X, W, W_root, bias, num_cols, keep, p)
    X, W = X.detach().contiguous(), W.detach()
    values = None if values is None else values.detach()
    scale = None if scale is None else scale.detach()
    if masks_in_kernel(indptr, indices, values, X, W, format, keep, W_root is not None):
        row_scale = _rows_scale(indptr, scale, X.dtype) * (1.0 / (1.0 - p))
        kept = torch_aggregate.masked_row_scaled(indptr, indices, X, keep, row_scale, num_cols)
        out = torch.addmm(bias.detach(), kept, W.t()) if bias is not None else torch.mm(kept, W.t())
        if W_root is not None:
            out.addmm_(_dropped(X[:rows], keep[:rows], p), W_root.detach().t())
        return out, kept
    if keep is not None:
        X = _dropped(X, keep, p)
    if _order(indptr, indices, X, W):
        out = _aggregate(indptr, indices, values, scale, torch.mm(X, W.t()), num_cols, format)
        kept = X.new_empty((0, f_in))
        if bias is not None:
            out.add_(bias.detach())
    else:
        kept = _aggregate(indptr, indices, values, scale, X, num_cols, format)
        out = torch.addmm(bias.detach(), kept, W.t()) if bias is not None else torch.mm(kept, W.t())
    if W_root is not None:
        out.addmm_(X[:rows], W_root.detach().t())
    return out, kept


@_aggregate_transform.register_fake
def _aggregate_transform_fake(indptr, indices, values, scale, X, W, W_root, bias, num_cols, format="csr", keep=None,
                              p=0.0):
    rows, f_in, f_out = _checks(indptr, indices, values, scale, X, W, W_root, bias, num_cols, keep, p)
    kept_rows = 0 if _order(indptr, indices, X, W) else rows
    return X.new_empty((rows, f_out)), X.new_empty((kept_rows, f_in))


def _setup(ctx, inputs, output):
    indptr, indices, values, scale, X, W, W_root, bias, num_cols, fmt, keep, p = inputs
    kept = output[1]
    ctx.save_for_backward(indptr, indices, values, scale, X, W, W_root, kept, keep)
    in_kernel = masks_in_kernel(indptr, indices, values, X, W, fmt, keep, W_root is not None)
    ctx.options = (num_cols, fmt, kept.shape[0] == indptr.shape[0] - 1 and kept.shape[0] > 0, p, in_kernel)
    ctx.set_materialize_grads(False)  # H's gradient is never used: no zeros for it


def _backward(ctx, d_out, _d_kept):
    indptr, indices, values, scale, X, W, W_root, kept, keep = ctx.saved_tensors
    num_cols, fmt, was_kept, p, in_kernel = ctx.options
    need = ctx.needs_input_grad
    if need[3]:
        raise RuntimeError("aggregate_transform is not differentiable in its row scale (a structure's 1 / degree)")
    nothing = [None] * 12
    if d_out is None:
        return tuple(nothing)
    need_v, need_x, need_w, need_root, need_bias = need[2], need[4], need[5], need[6], need[7]
    grads = list(nothing)
    d_out = d_out.contiguous()
    rows = indptr.shape[0] - 1
    if keep is not None and not in_kernel:
        X = _dropped(X, keep, p)  # the layer's input, as the forward made it
    source = (lambda: _dropped(X, keep, p)) if in_kernel else (lambda: X)  # X', made only where needed
    if need_bias:
        grads[7] = d_out.sum(0)
    if need_root:
        grads[6] = torch.mm(d_out.t(), _dropped(X[:rows], keep[:rows], p) if in_kernel else X[:rows])
    masked = False  # whether grads[4] has the dropout's mask and scale applied already
    if need_v or need_x or need_w:
        aggregates = backward_aggregates(int(X.shape[0]), rows, int(indices.shape[0]), int(W.shape[1]),
                                         int(W.shape[0]), kept=was_kept, need_x=need_x, need_w=need_w,
                                         need_values=need_v)
        d_h = torch.mm(d_out, W) if (need_v or (need_x and aggregates)) else None
        if aggregates:
            if need_x and in_kernel:
                row_scale = _rows_scale(indptr, scale, d_h.dtype) * (1.0 / (1.0 - p))
                grads[4] = torch_aggregate.masked_column_scaled(indptr, indices, d_h, keep, row_scale, num_cols)
                masked = True
            elif need_x:
                grads[4] = _aggregate_transposed(indptr, indices, values, scale, d_h, num_cols, fmt)
            if need_w:
                h = kept if was_kept or rows == 0 else _aggregate(indptr, indices, values, scale, source(), num_cols,
                                                                  fmt)  # no row: H is the empty kept one
                grads[5] = torch.mm(d_out.t(), h)
        else:
            d_p = _aggregate_transposed(indptr, indices, values, scale, d_out, num_cols, fmt)
            if need_x:
                grads[4] = torch.mm(d_p, W)
            if need_w:
                grads[5] = torch.mm(d_p.t(), source())
        if need_v:
            ones = torch.ones(indices.shape, dtype=d_h.dtype, device=d_h.device)
            grads[2] = torch.ops.sparsetir.sddmm(indptr, indices, ones, d_h, X,
                                                 *torch_ops._format_for("sddmm", fmt, "")).to(values.dtype)
    if need_x and W_root is not None:
        if masked:  # the root rows' share, masked on its own
            grads[4][:rows].add_(torch.mm(d_out, W_root).mul_(keep[:rows]), alpha=1.0 / (1.0 - p))
        else:
            grads[4][:rows].addmm_(d_out, W_root)
    if need_x and keep is not None and not masked:
        grads[4] = _dropped(grads[4], keep, p)
    return tuple(grads)


_aggregate_transform.register_autograd(_backward, setup_context=_setup)

# under torch.autocast: every floating operand in the autocast dtype (float64 excepted), as spmm's rule
for _device, _key in (("cpu", "AutocastCPU"), ("cuda", "AutocastCUDA")):
    torch_ops._AUTOCAST.impl("aggregate_transform",
                             torch_ops._autocast_rule(torch.ops.sparsetir.aggregate_transform.default, _device), _key,
                             with_keyset=True)


def aggregate_transform(indptr: Tensor, indices: Tensor, X: Tensor, W: Tensor, num_cols: int | None = None, *,
                        values: Tensor | None = None, scale: Tensor | None = None, W_root: Tensor | None = None,
                        bias: Tensor | None = None, format: str = "csr", keep: Tensor | None = None,
                        p: float = 0.0) -> Tensor:
    """``Â X W^T + X[:m] W_root^T + bias`` in the cheaper order, differentiable in ``X``, ``W``,
    ``W_root``, ``bias`` and ``values`` (``torch.ops.sparsetir.aggregate_transform``).

    ``indptr``/``indices``: ``adj_t`` in CSR (``m`` rows, ``num_cols`` columns; default: X's rows);
    ``values``: its per-entry weights, or ``scale``: one factor per row (``1 / degree``: the mean),
    or neither (a sum); ``W``: ``(f_out, f_in)`` as ``nn.Linear.weight``; ``W_root`` (optional, the
    same shape): applied to X's first ``m`` rows; ``format``: the SpMM's format where values are
    given (the row-scaled kernels are CSR); ``keep``, ``p``: an input dropout, the layer of ``X * keep /
    (1 - p)`` (``keep`` a bool mask of X's shape), the mask read inside the aggregation where it can be
    (module docstring).
    """
    num_cols = int(X.shape[0]) if num_cols is None else num_cols
    return torch.ops.sparsetir.aggregate_transform(indptr, indices, values, scale, X, W, W_root, bias, num_cols,
                                                   format, keep, p)[0]
