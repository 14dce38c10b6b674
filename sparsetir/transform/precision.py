"""``widen_accumulation``: reduce float16/bfloat16 outputs in a wider float (Stage I -> Stage I).

Requires: iterations whose reductions should be wider say so with ``accum_dtype``. For every
buffer such an iteration reduces into whose dtype is narrower, the function gets one
accumulator (an intermediate of ``accum_dtype`` over the same axes): every iteration that
stores into the buffer stores into the accumulator instead, loads of narrower floats in those
stores are cast up before any arithmetic, and a last iteration casts the accumulator back into
the buffer. Where the buffer's old contents are reduced into (``init=None``) they are copied in
first. ``backend.build`` runs it before lowering.

Before (float16 SpMM, ``accum_dtype="float32"``)::

    with sparse_iteration([I, J, K], 'SRS', name='spmm') as (i, j, k):
        C[i, k] += A[i, j] * B[j, k]

After::

    with sparse_iteration([I, J, K], 'SRS', name='spmm') as (i, j, k):
        C_acc[i, k] += T.Cast("float32", A[i, j]) * T.Cast("float32", B[j, k])
    with sparse_iteration([I, K], 'SS', name='C_cast') as (i, k):
        C[i, k] = T.Cast("float16", C_acc[i, k])
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx
from tvm.ir.expr import TensorLoad
from tvm.ir.prim.expr import FloatImm

from ..ir import SparseBuffer, SparseFunction, SparseIteration, SparseStore, sparse_iteration
from ..ir.axis import expr_dtype

_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def widen_accumulation(func: SparseFunction) -> SparseFunction:
    """``func`` with each narrower reduction target of an ``accum_dtype`` iteration accumulated wide."""
    if not isinstance(func, SparseFunction):
        raise TypeError(f"widen_accumulation takes a SparseFunction, got {type(func).__name__}")
    targets: dict[SparseBuffer, str] = {}
    for it in func.iterations:
        if it.accum_dtype is None:
            continue
        for store in it.stores:
            if store.accumulate and _narrower(store.buffer.dtype, it.accum_dtype):
                targets[store.buffer] = _wider(targets.get(store.buffer), it.accum_dtype)
    if not targets:
        return func
    accumulators = {buffer: SparseBuffer(f"{buffer.name}_acc", buffer.axes, dtype) for buffer, dtype in targets.items()}
    iterations, copied_in = [], set()
    for it in func.iterations:
        for buffer in _reads_old_contents(it, accumulators, copied_in):
            iterations.append(_copy(buffer, accumulators[buffer], f"{buffer.name}_copy_in"))
            copied_in.add(buffer)
        iterations.append(_retarget(it, accumulators))
        copied_in |= {store.buffer for store in it.stores if store.buffer in accumulators}
    iterations += [_copy(accumulators[buffer], buffer, f"{buffer.name}_cast") for buffer in accumulators]
    return SparseFunction(func.name, iterations, params=func.buffers, fused_groups=func.fused_groups, tiles=func.tiles)


def _narrower(dtype: str, wide: str) -> bool:
    return dtype in _BITS and _BITS[dtype] < _BITS[wide]


def _wider(current: str | None, dtype: str) -> str:
    return dtype if current is None or _BITS[dtype] > _BITS[current] else current


def _reads_old_contents(it: SparseIteration, accumulators: dict, written: set) -> list:
    """Targets this iteration reduces into as they are (``init=None``) before anything wrote their accumulator."""
    return list(dict.fromkeys(
        store.buffer for store in it.stores
        if store.buffer in accumulators and store.buffer not in written and store.accumulate and it.init_of(store) is None))


def _retarget(it: SparseIteration, accumulators: dict) -> SparseIteration:
    """``it`` storing into the accumulators and reading them (cast back) where it read the buffers."""
    if not any(store.buffer in accumulators for store in it.stores) and not _loads_any(it, accumulators):
        return it
    views = {buffer.coordinate_view: buffer for buffer in accumulators}

    def read_accumulators(expr):
        def on_load(load, mutator):
            buffer = next((b for view, b in views.items() if view.same_as(load.source)), None)
            indices = [mutator.mutate(i) for i in load.indices]
            if buffer is None:
                return tirx.BufferLoad(load.source, indices)
            return tirx.Cast(buffer.dtype, tirx.BufferLoad(accumulators[buffer].coordinate_view, indices))

        return tvm_ffi.structural_mutate(expr, [(TensorLoad, on_load)])

    stores = []
    for store in it.stores:
        value = read_accumulators(store.value)
        indices = tuple(read_accumulators(i) for i in store.indices)
        if store.buffer in accumulators:
            wide = accumulators[store.buffer]
            stores.append(SparseStore(wide, indices, _cast_up(value, wide.dtype), store.reducer))
        else:
            stores.append(SparseStore(store.buffer, indices, value, store.reducer))
    buffers = list(dict.fromkeys([*it.buffers, *(accumulators[b] for b in it.buffers if b in accumulators)]))
    return SparseIteration(it.name, it.groups, it.kinds, it.iter_vars, stores, it.init, buffers, it.atomic,
                           it.init_scope, it.accum_dtype)


def _loads_any(it: SparseIteration, accumulators: dict) -> bool:
    found = []
    for store in it.stores:
        for expr in (store.value, *store.indices):
            tvm_ffi.structural_walk(expr, [(TensorLoad, lambda load: found.append(load.source))])
    return any(view.same_as(b.coordinate_view) for view in found for b in accumulators)


def _cast_up(value, dtype: str):
    """``value`` in ``dtype``. Arithmetic on loads and constants is redone in ``dtype`` (each narrower
    float cast up first, so products keep their bits); anything else (calls such as ``exp``) is
    computed as written and its result cast."""
    try:
        return _rebuild(value, dtype)
    except _NotPlain:
        return value if expr_dtype(value) == dtype else tirx.Cast(dtype, value)


class _NotPlain(Exception):
    """An expression ``_rebuild`` does not redo in a wider type."""


_ARITHMETIC = {tirx.Add: lambda a, b: a + b, tirx.Sub: lambda a, b: a - b, tirx.Mul: lambda a, b: a * b,
               tirx.Div: lambda a, b: a / b, tirx.Max: tirx.Max, tirx.Min: tirx.Min}


def _rebuild(expr, dtype: str):
    if isinstance(expr, TensorLoad):
        return tirx.Cast(dtype, expr) if _narrower(str(expr.ty), dtype) else expr
    if isinstance(expr, FloatImm):
        return tirx.const(expr.value, dtype) if _narrower(str(expr.ty), dtype) else expr
    for node, combine in _ARITHMETIC.items():
        if isinstance(expr, node):
            return combine(_rebuild(expr.a, dtype), _rebuild(expr.b, dtype))
    if isinstance(expr, tirx.Cast) and str(expr.ty) in _BITS:
        return tirx.Cast(dtype, expr.value) if _narrower(str(expr.ty), dtype) else expr
    raise _NotPlain(type(expr).__name__)


def _copy(source: SparseBuffer, target: SparseBuffer, name: str) -> SparseIteration:
    """``target[...] = cast(source[...])`` over the buffers' axes."""

    @sparse_iteration(list(target.axes), "S" * len(target.axes), name=name)
    def copy(*coordinates):
        target[coordinates] = tirx.Cast(target.dtype, source[coordinates])

    return copy
