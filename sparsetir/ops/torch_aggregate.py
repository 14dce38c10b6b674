"""``torch.ops.sparsetir.spmm_reduce``: max/min aggregation over a CSR structure, with autograd.

Importing ``sparsetir.ops`` registers it with ``torch.library``, with fake kernels (so
``torch.compile`` traces it)::

    spmm_reduce(indptr, indices, B, num_cols, reduce) -> C
        C[i] = max (or min, ``reduce="min"``) of B[j] over row i's entries j, feature by feature;
        0 for an empty row (PyG's semantics)
    spmm_reduce_backward(indptr, indices, B, C, grad, num_cols, reduce) -> dB

The kernels are ``ops.aggregate``'s, bound to the structure ``torch_ops`` caches (a sampled
block's proof applies: no validation, and its transpose is the one the backward uses). The
gradient is PyG's on the CPU (``scatter_reduce(include_self=False)`` into zeros): target ``i``'s
gradient is split evenly among the entries equal to ``C[i]``, counting one more where ``C[i]`` is
0; entries below the max get none. The backward is not differentiable again.

    spmm_row_scaled(indptr, indices, B, scale, num_cols) -> C = diag(scale) A B, A's values all 1
    spmm_column_scaled(indptr, indices, G, scale, num_cols) -> A^T diag(scale) G (its gradient)

``SAGEConv``'s mean on an unweighted structure: ``scale = 1 / degree``, applied in the reduction,
with no per-edge value array to build, permute into A^T's order or compare.

:func:`masked_row_scaled` and :func:`masked_column_scaled` are the same two products under a
dropout's bool keep mask of ``B`` (``G``'s result), read inside the reduction (``ops.aggregate``'s
``rows_masked``/``columns_masked``): ``ops.aggregate_transform``'s fused dropout calls them inside
its own autograd, so they are plain functions, not torch ops.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from . import torch_ops
from .aggregate import REDUCERS, aggregation_kernel

__all__ = ["masked_column_scaled", "masked_row_scaled", "spmm_reduce", "spmm_row_scaled"]

_EMPTY_ROWS = "aggregate_empty_rows"  # the key of a structure's empty rows in its ``extras``


def _checks(indptr: Tensor, indices: Tensor, B: Tensor, num_cols: int, reduce: str) -> int:
    if reduce not in REDUCERS:
        raise ValueError(f"reduce must be one of {', '.join(REDUCERS)}, got {reduce!r}")
    torch_ops._check_dense(B, "B", B.shape[0] if B.dim() == 2 else -1, "")
    torch_ops._check_structure(indptr, indices, B.new_empty((indices.shape[0],)), num_cols)
    torch_ops._check_dense(B, "B", num_cols, "one row per column of A")
    torch_ops._check_devices(indptr, indices, B)
    return int(indptr.shape[0]) - 1


def _kernel(record, stage: str, reduce: str, feat: int, dtype: torch.dtype, device: torch.device):
    key = ("aggregate", stage, reduce, feat, dtype)
    kernel = record.kernels.get(key)
    if kernel is None:
        with torch_ops._LOCK:
            kernel = record.kernels.get(key)
            if kernel is None:
                transposed = stage in ("spread", "columns", "columns_masked")
                matrix = torch_ops._transposed(record)[0] if transposed else record.matrix
                kernel = aggregation_kernel(stage, reduce, matrix, feat, str(dtype).replace("torch.", ""),
                                            torch_ops._target_of("", device))
                record.kernels[key] = kernel
                torch_ops._STATS.kernels += 1
    return kernel


def _empty_rows(record, device: torch.device) -> Tensor:
    rows = record.extras.get(_EMPTY_ROWS)
    if rows is None:
        degree = np.diff(np.asarray(record.matrix.indptr))
        rows = record.extras[_EMPTY_ROWS] = torch.from_numpy(np.flatnonzero(degree == 0)).to(device)
    return rows


@torch.library.custom_op("sparsetir::spmm_reduce", mutates_args=())
def _spmm_reduce(indptr: Tensor, indices: Tensor, B: Tensor, num_cols: int, reduce: str = "max") -> Tensor:
    _checks(indptr, indices, B, num_cols, reduce)
    record = torch_ops._structure(indptr, indices, num_cols)
    out = _kernel(record, "reduce", reduce, int(B.shape[1]), B.dtype, B.device)(B.detach().contiguous())
    empty = _empty_rows(record, B.device)
    if empty.numel():
        out.index_fill_(0, empty, 0)  # PyG's semantics: an empty row gives 0, not the identity
    return out


@_spmm_reduce.register_fake
def _spmm_reduce_fake(indptr, indices, B, num_cols, reduce="max"):
    rows = _checks(indptr, indices, B, num_cols, reduce)
    return B.new_empty((rows, B.shape[1]))


@torch.library.custom_op("sparsetir::spmm_reduce_backward", mutates_args=())
def _spmm_reduce_backward(indptr: Tensor, indices: Tensor, B: Tensor, C: Tensor, grad: Tensor, num_cols: int,
                          reduce: str = "max") -> Tensor:
    rows = _checks(indptr, indices, B, num_cols, reduce)
    for name, tensor in (("C", C), ("grad", grad)):
        torch_ops._check_dense(tensor, name, rows, "one row per row of A")
        if tensor.shape[1] != B.shape[1] or tensor.dtype != B.dtype:
            raise ValueError(f"{name} must be ({rows}, {B.shape[1]}) of {B.dtype}, got {tuple(tensor.shape)} "
                             f"{tensor.dtype}")
    record = torch_ops._structure(indptr, indices, num_cols)
    feat, dtype, device = int(B.shape[1]), B.dtype, B.device
    B, C, grad = B.detach().contiguous(), C.detach().contiguous(), grad.detach().contiguous()
    ties = _kernel(record, "ties", reduce, feat, dtype, device)(B, C)
    share = grad / (ties + (C == 0).to(dtype))  # torch's count: the zeros it started from are compared too
    return _kernel(record, "spread", reduce, feat, dtype, device)(B, C, share.contiguous())


@_spmm_reduce_backward.register_fake
def _spmm_reduce_backward_fake(indptr, indices, B, C, grad, num_cols, reduce="max"):
    _checks(indptr, indices, B, num_cols, reduce)
    return torch.empty_like(B)


def _setup(ctx, inputs, output):
    indptr, indices, B, num_cols, reduce = inputs
    ctx.save_for_backward(indptr, indices, B, output)
    ctx.options = (num_cols, reduce)


def _backward(ctx, grad):
    indptr, indices, B, out = ctx.saved_tensors
    num_cols, reduce = ctx.options
    d_B = None
    if ctx.needs_input_grad[2]:
        d_B = torch.ops.sparsetir.spmm_reduce_backward(indptr, indices, B, out, grad.contiguous(), num_cols, reduce)
    return None, None, d_B, None, None


_spmm_reduce.register_autograd(_backward, setup_context=_setup)


# --- the mean as a row scale: no value array -------------------------------------------------------

def _scale_checks(indptr, indices, B, scale, num_cols, rows_of_B: bool) -> int:
    rows = int(indptr.shape[0]) - 1
    torch_ops._check_dense(B, "B", B.shape[0] if B.dim() == 2 else -1, "")
    torch_ops._check_structure(indptr, indices, B.new_empty((indices.shape[0],)), num_cols)
    torch_ops._check_dense(B, "B", num_cols if rows_of_B else rows,
                           "one row per column of A" if rows_of_B else "A^T @ G needs G with A's rows")
    if scale.dim() != 1 or scale.shape[0] != rows or scale.dtype != B.dtype:
        raise ValueError(f"scale must be ({rows},) of {B.dtype} (one per row of A), got {tuple(scale.shape)} "
                         f"{scale.dtype}")
    torch_ops._check_devices(indptr, indices, B, scale)
    return rows


@torch.library.custom_op("sparsetir::spmm_row_scaled", mutates_args=())
def _spmm_row_scaled(indptr: Tensor, indices: Tensor, B: Tensor, scale: Tensor, num_cols: int) -> Tensor:
    _scale_checks(indptr, indices, B, scale, num_cols, True)
    record = torch_ops._structure(indptr, indices, num_cols)
    kernel = _kernel(record, "rows", "", int(B.shape[1]), B.dtype, B.device)
    return kernel(B.detach().contiguous(), scale.detach().contiguous())


@_spmm_row_scaled.register_fake
def _spmm_row_scaled_fake(indptr, indices, B, scale, num_cols):
    rows = _scale_checks(indptr, indices, B, scale, num_cols, True)
    return B.new_empty((rows, B.shape[1]))


@torch.library.custom_op("sparsetir::spmm_column_scaled", mutates_args=())
def _spmm_column_scaled(indptr: Tensor, indices: Tensor, G: Tensor, scale: Tensor, num_cols: int) -> Tensor:
    _scale_checks(indptr, indices, G, scale, num_cols, False)
    record = torch_ops._structure(indptr, indices, num_cols)
    kernel = _kernel(record, "columns", "", int(G.shape[1]), G.dtype, G.device)
    return kernel(G.detach().contiguous(), scale.detach().contiguous())


@_spmm_column_scaled.register_fake
def _spmm_column_scaled_fake(indptr, indices, G, scale, num_cols):
    _scale_checks(indptr, indices, G, scale, num_cols, False)
    return G.new_empty((num_cols, G.shape[1]))


def _scaled_setup(ctx, inputs, output):
    indptr, indices, _B, scale, num_cols = inputs
    ctx.save_for_backward(indptr, indices, scale)
    ctx.num_cols = num_cols


def _scaled_backward(ctx, grad):
    indptr, indices, scale = ctx.saved_tensors
    if ctx.needs_input_grad[3]:
        raise RuntimeError("spmm_row_scaled is not differentiable in its scale (a mean's 1 / degree)")
    d_B = None
    if ctx.needs_input_grad[2]:
        d_B = torch.ops.sparsetir.spmm_column_scaled(indptr, indices, grad.contiguous(), scale, ctx.num_cols)
    return None, None, d_B, None, None


_spmm_row_scaled.register_autograd(_scaled_backward, setup_context=_scaled_setup)


def _masked_product(stage: str, indptr: Tensor, indices: Tensor, B: Tensor, keep: Tensor, scale: Tensor,
                    num_cols: int) -> Tensor:
    """``stage`` (``rows_masked`` or ``columns_masked``) on the structure, B, the bool ``keep`` as uint8, ``scale``."""
    record = torch_ops._structure(indptr, indices, num_cols)
    kernel = _kernel(record, stage, "", int(B.shape[1]), B.dtype, B.device)
    return kernel(B.detach().contiguous(), keep.contiguous().view(torch.uint8), scale.detach().contiguous())


def masked_row_scaled(indptr: Tensor, indices: Tensor, B: Tensor, keep: Tensor, scale: Tensor, num_cols: int) -> Tensor:
    """``scale[i] * sum_j (B * keep)[j]`` over row i's entries, the bool ``keep`` (B's shape) read in the
    reduction: a dropout of B with no dropped copy of it (``scale`` carries the ``1 / (1 - p)``). No
    autograd; the caller has checked the operands (``ops.aggregate_transform``)."""
    return _masked_product("rows_masked", indptr, indices, B, keep, scale, num_cols)


def masked_column_scaled(indptr: Tensor, indices: Tensor, G: Tensor, keep: Tensor, scale: Tensor,
                         num_cols: int) -> Tensor:
    """``keep * (A^T diag(scale) G)`` (``num_cols`` rows), the mask applied in the reduction over A^T: the
    gradient of :func:`masked_row_scaled` in B. No autograd; the caller has checked the operands."""
    return _masked_product("columns_masked", indptr, indices, G, keep, scale, num_cols)


def spmm_row_scaled(indptr: Tensor, indices: Tensor, B: Tensor, scale: Tensor, num_cols: int) -> Tensor:
    """``torch.ops.sparsetir.spmm_row_scaled``: ``scale[i] * sum_j B[j]`` over row i's entries (no value
    array); differentiable in B (``dB = A^T (scale * dC)``, ``spmm_column_scaled``)."""
    return torch.ops.sparsetir.spmm_row_scaled(indptr, indices, B, scale, num_cols)


def spmm_reduce(indptr: Tensor, indices: Tensor, B: Tensor, num_cols: int, reduce: str = "max") -> Tensor:
    """``torch.ops.sparsetir.spmm_reduce``: the max (min) of B's rows over each row's entries, 0 where empty."""
    return torch.ops.sparsetir.spmm_reduce(indptr, indices, B, num_cols, reduce)
