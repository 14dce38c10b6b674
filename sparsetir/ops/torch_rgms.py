"""``torch.ops.sparsetir.rgms``: relational gather-matmul-scatter with autograd, for R-GCN training.

Importing ``sparsetir.ops`` registers it with ``torch.library``, with a fake kernel (so
``torch.compile`` traces it) and an autograd formula::

    rgms(indptr, indices, values, X, W, num_cols, transpose=False, format="", knobs="", target="")
        transpose=False: Y = sum_r A_r @ X @ W[r]      X (num_cols, f_in) -> Y (m, f_out)
        transpose=True:  Y = sum_r A_r^T @ X @ W[r]    X (m, f_in)        -> Y (num_cols, f_out)

The structure is the relation-major stacking of ``formats.relational.RelationalMatrix``: ``R =
W.shape[0]`` relations of ``m x num_cols``, relation ``r``'s rows being rows ``r*m .. r*m+m-1`` of
one ``(R*m) x num_cols`` CSR (``indptr`` of ``R*m + 1`` entries, ``indices``, ``values``). The
kernels are ``ops.compile_rgms``'s (``format`` ``""``: its default; ``"auto"``: the tuning
database), compiled once per structure and feature sizes, and cached with the structure as
``torch_ops`` caches SpMM's (identity of the index tensors, then their content).

Gradients, each through these same ops (so they are differentiable again):

- ``dX = rgms(A, dY, W^T, transpose=not transpose)``: the relations transposed (built once per
  structure, values permuted into their order);
- ``dW[r] = (A_r X)^T dY`` (``transpose=False``; ``X^T (A_r dY)`` for ``transpose=True``): one SpMM
  (``torch.ops.sparsetir.spmm``) over the stacked structure's non-empty rows, then per relation
  the product of its rows with the rows of the other operand they belong to;
- ``dvalues[e] = (X[j] W[r]) . dY[i]`` for entry ``e = (r, i, j)`` (``X[i]`` and ``dY[j]`` transposed).
"""

from __future__ import annotations

import json

import numpy as np
import torch
from torch import Tensor

from ..formats.relational import RelationalMatrix
from ..runtime.validate import entry_rows
from . import torch_ops
from .rgms import compile_rgms

__all__ = ["rgms_kernels", "rgms_torch"]

_DERIVED = "rgms"  # the key of this module's entries in a cached structure's ``extras``


def _checks(indptr: Tensor, indices: Tensor, values: Tensor, X: Tensor, W: Tensor, num_cols: int,
            transpose: bool) -> tuple[int, int, int]:
    """``(R, m, output rows)`` after checking every operand (the real and the fake kernel run this)."""
    torch_ops._check_structure(indptr, indices, values, num_cols)
    if W.dim() != 3:
        raise ValueError(f"W must be 3-D (relations, f_in, f_out), got shape {tuple(W.shape)}")
    if W.dtype not in torch_ops.VALUE_DTYPES:
        raise TypeError(f"W has dtype {W.dtype}; supported: {', '.join(map(str, torch_ops.VALUE_DTYPES))}")
    relations = int(W.shape[0])
    stacked = int(indptr.shape[0]) - 1
    if relations < 1 or stacked < 0 or stacked % relations:
        raise ValueError(f"indptr has {indptr.shape[0]} entries: not R*m + 1 for W's R = {relations} relations")
    m = stacked // relations
    rows = m if transpose else num_cols
    what = "transpose=True takes X with A's rows" if transpose else "X has one row per column of A"
    torch_ops._check_dense(X, "X", rows, what)
    if W.shape[1] != X.shape[1]:
        raise ValueError(f"W is {tuple(W.shape)} but X has {X.shape[1]} columns (W must be (R, f_in, f_out))")
    if X.dtype != W.dtype:
        raise TypeError(f"X and W must share a dtype, got {X.dtype} and {W.dtype}")
    torch_ops._check_devices(indptr, indices, values, X, W)
    return relations, m, num_cols if transpose else m


def _derived(record, relations: int) -> dict:
    """What the gradients need of a structure (built once per structure and relation count)."""
    cache = record.extras.setdefault(_DERIVED, {})
    if relations in cache:
        return cache[relations]
    matrix = record.matrix
    stacked_rows, n = matrix.shape
    m = stacked_rows // relations
    indptr, indices = matrix.indptr, matrix.indices  # the record's own validated arrays (int32 where they fit)
    entry_stacked = entry_rows(indptr)
    relation_of, row_of = entry_stacked // max(m, 1), entry_stacked % max(m, 1)
    nonempty = np.flatnonzero(np.diff(indptr))  # the stacked rows with entries: (relation, row) pairs
    device = record.device
    info = {
        "m": m,
        "relational": RelationalMatrix((m, n), relations, indptr, indices, np.ones(matrix.nnz, np.float32)),
        "compact_indptr": torch.from_numpy(np.r_[indptr[nonempty], matrix.nnz].astype(np.int64)).to(device),
        "pair_rows": torch.from_numpy(nonempty % max(m, 1)).to(device),
        "pair_bounds": np.searchsorted(nonempty // max(m, 1), np.arange(relations + 1)).tolist(),
        "entry_bounds": np.searchsorted(relation_of, np.arange(relations + 1)).tolist(),
        "entry_rows": torch.from_numpy(row_of).to(device),
        "entry_cols": torch.from_numpy(indices.astype(np.int64)).to(device),
        "transposed": None,
    }
    cache[relations] = info
    return info


def _transposed(info: dict, device) -> tuple:
    """The relations transposed (``num_cols x m`` each) and ``order``: entry p of it is entry order[p]."""
    if info["transposed"] is None:
        relational = info["relational"]
        m, n = relational.shape
        relation, row, col = relational.coordinates()
        order = np.lexsort((row, relation * max(n, 1) + col))  # stable: by relation, column, then row
        counts = np.bincount(relation[order] * max(n, 1) + col[order], minlength=relational.num_relations * n)
        indptr = np.zeros(relational.num_relations * n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        flipped = RelationalMatrix((n, m), relational.num_relations, indptr, row[order],
                                   np.ones(order.size, np.float32))
        info["transposed"] = (flipped, torch.from_numpy(order.astype(np.int64)).to(device))
    return info["transposed"]


def _kernel(record, info: dict, f_in: int, f_out: int, dtype: torch.dtype, transpose: bool, fmt: str, knobs: str,
            target: str, device, values: Tensor):
    """The kernel for this structure and these sizes, compiled (once) with ``values`` bound: a later
    call with the same converted values (``_kernel_values``) passes none, so the kernel reorders none."""
    key = ("rgms", info["relational"].num_relations, f_in, f_out, dtype, transpose, fmt, knobs, target)
    kernel = record.kernels.get(key)
    if kernel is not None:
        return kernel
    with torch_ops._LOCK:  # one compile per key, also from autograd's or a data loader's threads
        kernel = record.kernels.get(key)
        if kernel is None:
            matrix = _transposed(info, device)[0] if transpose else info["relational"]
            matrix = RelationalMatrix(matrix.shape, matrix.num_relations, matrix.indptr, matrix.indices,
                                      values.detach().to("cpu").numpy())
            options = json.loads(knobs) if knobs else {}
            kernel = compile_rgms(matrix, f_in, f_out, format=fmt or None, target=torch_ops._target_of(target, device),
                                  dtype=str(dtype).replace("torch.", ""), **options)
            kernel.bound_values = values  # the converted values bound: passed again, they need no values=
            torch_ops._STATS.kernels += 1
            torch_ops._STATS.compile_s += kernel.timings.get("compile_s", 0.0)
            torch_ops._STATS.convert_s += kernel.timings.get("convert_s", 0.0)
            record.kernels[key] = kernel
    return kernel


def _kernel_values(info: dict, values: Tensor, dtype: torch.dtype, transpose: bool, device) -> Tensor:
    """Values in the kernel's dtype (and, for ``transpose``, A^T's order), kept while equal values come
    back (a layer's normalisation: every call). Equality is checked by content (writes through
    ``.data`` leave no trace in the version counter)."""
    slot = "values_t" if transpose else "values"
    cached = info.get(slot)
    if cached is not None:
        copy, converted = cached
        if copy.dtype == values.dtype and converted.dtype == dtype and torch.equal(copy, values.detach()):
            return converted
    converted = values.detach().to(dtype)
    if transpose:
        converted = torch.index_select(converted, 0, _transposed(info, device)[1])
    info[slot] = (values.detach().clone(), converted)
    return converted


@torch.library.custom_op("sparsetir::rgms", mutates_args=())
def _rgms(indptr: Tensor, indices: Tensor, values: Tensor, X: Tensor, W: Tensor, num_cols: int,
          transpose: bool = False, format: str = "", knobs: str = "", target: str = "") -> Tensor:
    relations, _m, rows = _checks(indptr, indices, values, X, W, num_cols, transpose)
    f_in, f_out = int(W.shape[1]), int(W.shape[2])
    if indices.shape[0] == 0 or rows == 0 or X.shape[0] == 0:  # nothing to gather: no kernel to run
        return X.new_zeros((rows, f_out))
    record = torch_ops._structure(indptr, indices, num_cols)
    info = _derived(record, relations)
    converted = _kernel_values(info, values, X.dtype, transpose, X.device)
    kernel = _kernel(record, info, f_in, f_out, X.dtype, transpose, format, knobs, target, X.device, converted)
    return kernel(X.detach().contiguous(), W.detach().contiguous(),
                  values=None if kernel.bound_values is converted else converted)


@_rgms.register_fake
def _rgms_fake(indptr, indices, values, X, W, num_cols, transpose=False, format="", knobs="", target=""):
    _relations, _m, rows = _checks(indptr, indices, values, X, W, num_cols, transpose)
    return X.new_empty((rows, W.shape[2]))


def _setup(ctx, inputs, output):
    indptr, indices, values, X, W, num_cols, transpose, fmt, knobs, target = inputs
    ctx.save_for_backward(indptr, indices, values, X, W)
    ctx.options = (num_cols, transpose, fmt, knobs, target)


def _backward(ctx, grad):
    indptr, indices, values, X, W = ctx.saved_tensors
    num_cols, transpose, fmt, knobs, target = ctx.options
    grad = grad.contiguous()
    d_values = d_X = d_W = None
    if indices.shape[0] == 0 or X.shape[0] == 0 or grad.shape[0] == 0:
        zeros = (torch.zeros_like(values), torch.zeros_like(X), torch.zeros_like(W))
        return (None, None, *(z if ctx.needs_input_grad[k] else None for k, z in zip((2, 3, 4), zeros)),
                None, None, None, None, None)
    if ctx.needs_input_grad[3]:
        d_X = torch.ops.sparsetir.rgms(indptr, indices, values, grad, W.transpose(1, 2).contiguous(), num_cols,
                                       not transpose, fmt, knobs, target)
    if ctx.needs_input_grad[2] or ctx.needs_input_grad[4]:
        info = _derived(torch_ops._structure(indptr, indices, num_cols), int(W.shape[0]))
        if ctx.needs_input_grad[4]:
            d_W = _weight_grad(info, indptr, indices, values, X, grad, num_cols, transpose, fmt, target)
        if ctx.needs_input_grad[2]:
            d_values = _values_grad(info, X, W, grad, transpose).to(values.dtype)
    return None, None, d_values, d_X, d_W, None, None, None, None, None


def _weight_grad(info, indptr, indices, values, X, grad, num_cols, transpose, fmt, target) -> Tensor:
    """``dW[r] = (A_r X)^T dY`` (or ``X^T (A_r dY)``), over the (relation, row) pairs that have entries."""
    spmm_format, _ = torch_ops._format_for("spmm", fmt or "csr", "")
    gathered = X if not transpose else grad  # the operand on A's column side
    aggregated = torch.ops.sparsetir.spmm(info["compact_indptr"], indices, values.to(gathered.dtype), gathered,
                                          num_cols, False, spmm_format, "", target)
    rows = torch.index_select(grad if not transpose else X, 0, info["pair_rows"])
    left, right = (aggregated, rows) if not transpose else (rows, aggregated)
    bounds = info["pair_bounds"]
    zeros = X.new_zeros((X.shape[1], grad.shape[1]))
    return torch.stack([left[lo:hi].t() @ right[lo:hi] if hi > lo else zeros
                        for lo, hi in zip(bounds[:-1], bounds[1:])])


def _values_grad(info, X, W, grad, transpose) -> Tensor:
    """``(X[j] W[r]) . dY[i]`` per entry (``X[i]`` and ``dY[j]`` for ``transpose``), relation by relation."""
    rows, cols = info["entry_rows"], info["entry_cols"]
    source, target = (cols, rows) if not transpose else (rows, cols)
    bounds = info["entry_bounds"]
    parts = []
    for r, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        if hi > lo:
            messages = torch.index_select(X, 0, source[lo:hi]) @ W[r]
            parts.append((messages * torch.index_select(grad, 0, target[lo:hi])).sum(dim=1))
    return torch.cat(parts) if parts else X.new_zeros((0,))


_rgms.register_autograd(_backward, setup_context=_setup)


def rgms_torch(indptr: Tensor, indices: Tensor, values: Tensor, X: Tensor, W: Tensor, num_cols: int, *,
               transpose: bool = False, format=None, target=None, **knobs) -> Tensor:
    """``torch.ops.sparsetir.rgms`` with Python options: ``format`` (None: ``compile_rgms``'s default),
    ``target`` (None: from X's device) and the compile knobs as keywords."""
    if not isinstance(transpose, bool):
        raise TypeError(f"transpose must be True or False, got {transpose!r}")
    fmt = "" if format is None else torch_ops.format_string(format)
    _fmt, knob_text, target_text = torch_ops._options("csr", torch_ops._explicit_target(target, X.device), knobs)
    return torch.ops.sparsetir.rgms(indptr, indices, values, X, W, num_cols, transpose, fmt, knob_text, target_text)


def rgms_kernels(indptr: Tensor, indices: Tensor, num_cols: int) -> list:
    """The forward kernels ``torch.ops.sparsetir.rgms`` compiled for this structure so far (for a
    benchmark's conversion and compile columns); empty when the structure is not cached."""
    with torch_ops._LOCK:
        for record in torch_ops._STRUCTURES.values():
            if record.same_objects(indptr, indices) and record.cols == num_cols:
                return [kernel for key, kernel in record.kernels.items() if key[0] == "rgms" and not key[5]]
    return []
