"""Software prefetch of gathered rows: ``insert_prefetch``, a TIR rewrite applied after scheduling.

Requires: a scheduled Stage III module whose leaf blocks read a dense input ``D`` at a row
given by a load from a 1-D index input ``X`` at a position ``e`` that grows with a loop
``p`` (SpMM's ``B[J_indices[J_indptr[vi] + j], k]``, an ELL's ``B[J_indices[vi * 8 + j], k]``,
SDDMM's ``Y[J_indices[J_indptr[vi] + j], k]``). Both are parameters and nothing writes them.
The rule is structural: buffer names and formats play no part. Loads under a condition (a block
predicate, an ``if``, a select) are left alone, since their position may be out of range there,
except under a padded format's guard (``ir.padding.guard_padding``), whose loads are all in range.

For the innermost loop ``p`` that ``e`` depends on (``e`` uses no variable defined under ``p``,
reads only inputs, and ``e(p + d) - e(p)`` simplifies to a positive constant), the body of ``p`` starts with a
prefetch of the row needed ``d`` positions ahead, clamped to the last entry of ``X``, so the
load of ``X`` never leaves the buffer. The clamp is to ``X``'s end rather than the row's, so
short rows prefetch into the next ones (which the same thread runs next). Before, CSR SpMM::

    for j in range(J_indptr[vi + 1] - J_indptr[vi]):
        for k_0 in T.unroll(2):
            for k_1 in T.vectorized(16):
                with T.sblock("spmm1_update"):
                    ...
                    C[vi, vk] = C[vi, vk] + A[J_indptr[vi] + vj] * B[J_indices[J_indptr[vi] + vj], vk]

after ``insert_prefetch(mod, 8, all_lines=False)``::

    for j in range(J_indptr[vi + 1] - J_indptr[vi]):
        T.call_llvm_intrin("void", "llvm.prefetch",
                           T.address_of(B[J_indices[T.min(J_indptr[vi] + (j + 8), nnz - 1)], 0]), 0, 3, 1)
        for k_0 in T.unroll(2):
            ...

With ``all_lines`` (the default) every 64-byte line of the row is prefetched (one call per
line, the first element's line and then every 64 bytes), else only the line of its first element.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, sym, tirx
from tvm.ir.expr import TensorLoad

from ..ir.padding import is_padding_guard

PREFETCH_INTRIN = "llvm.prefetch"
CACHE_LINE_BYTES = 64
# llvm.prefetch(address, rw, locality, cache type): a read, kept in all levels, of data
READ, KEEP_IN_ALL_LEVELS, DATA_CACHE = 0, 3, 1


def check_prefetch(distance) -> int:
    """The knob ``prefetch``: a distance in non-zeros, an int >= 0 (0: off)."""
    if isinstance(distance, bool) or not isinstance(distance, int) or distance < 0:
        raise ValueError(f"prefetch must be an int >= 0 (a distance in non-zeros; 0 disables it), got {distance!r}")
    return distance


def insert_prefetch(mod: tvm.IRModule, distance: int, *, all_lines: bool = True) -> tvm.IRModule:
    """Prefetch gathered rows ``distance`` positions ahead in every PrimFunc of ``mod`` (see module doc)."""
    if not check_prefetch(distance):
        return mod
    for gvar, func in list(mod.functions.items()):
        if isinstance(func, tirx.PrimFunc):
            mod[gvar] = func.with_body(_insert(func, distance, all_lines))
    return mod


def is_prefetch(node) -> bool:
    """Whether ``node`` (a statement or expression) is a prefetch this module inserts."""
    call = node.value if isinstance(node, tirx.Evaluate) else node
    return (isinstance(call, tvm.ir.expr.Call) and getattr(call.op, "name", None) == "tirx.call_llvm_intrin"
            and isinstance(call.args[0], tirx.IntImm) and call.args[0].value == _prefetch_id())


def _prefetch_id() -> int:
    """LLVM's intrinsic id of ``llvm.prefetch`` (``call_llvm_intrin`` stores the id, not the name)."""
    global _PREFETCH_ID
    if _PREFETCH_ID is None:
        _PREFETCH_ID = int(tirx.call_llvm_intrin("void", PREFETCH_INTRIN, 0, READ, KEEP_IN_ALL_LEVELS,
                                                 DATA_CACHE).args[0].value)
    return _PREFETCH_ID


_PREFETCH_ID = None


def _insert(func: tirx.PrimFunc, distance: int, all_lines: bool):
    inputs = {param for param in func.params if isinstance(param.ty, tirx.BufferType)}
    written = set()
    tvm_ffi.structural_walk(func.body, [(tirx.BufferStore, lambda store: written.add(store.buffer))])
    readonly = inputs - written
    analyzer = sym.Analyzer()

    def on_for(loop, mutator):
        loop = mutator.default_mutate(loop)
        if loop.kind == tirx.ForKind.VECTORIZED or (isinstance(loop.extent, tirx.IntImm) and loop.extent.value == 0):
            return loop
        calls = []
        for gather in _gathers(loop, readonly):
            for address in _ahead(loop, gather, distance, all_lines, analyzer, readonly):
                if not any(tvm_ffi.structural_equal(address, seen) for seen in calls):
                    calls.append(address)
        if not calls:
            return loop
        prefetches = [tirx.Evaluate(tirx.call_llvm_intrin("void", PREFETCH_INTRIN, tirx.address_of(address),
                                                          READ, KEEP_IN_ALL_LEVELS, DATA_CACHE))
                      for address in calls]
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, tirx.SeqStmt([*prefetches, loop.body]),
                        loop.thread_binding, loop.annotations)

    return tvm_ffi.structural_mutate(func.body, [(tirx.For, on_for)])


class _Gather:
    """``D[..., X[e], ...]`` found under a loop, with block variables replaced by their bindings."""

    def __init__(self, load, row_dim, inner):
        self.load = load  # the TensorLoad of D
        self.row_dim = row_dim  # which index of D is the load of X
        self.inner = inner  # {var defined under the loop: its smallest value, or None if unknown}


def _gathers(loop, readonly) -> list[_Gather]:
    """Loads of a read-only input at a row read from a read-only 1-D input, in leaf blocks under ``loop``."""
    found = []
    inner = {}

    def visit(stmt, scope):
        def on_realize(realize):
            if not (isinstance(realize.predicate, tirx.IntImm) and realize.predicate.value):
                return tvm_ffi.WalkResult.SKIP  # a guarded load: its position may be out of range
            block = realize.block
            bound = dict(scope)
            for iv, value in zip(block.iter_vars, realize.iter_values):
                bound[iv.var] = _substitute(value, scope)
            visit(block.body, bound)  # not the init: it only writes
            return tvm_ffi.WalkResult.SKIP

        def on_for(inner_loop):
            inner[inner_loop.loop_var] = _substitute(inner_loop.min, scope)

        def on_call(call):
            guarded = getattr(call.op, "name", None) == "tirx.if_then_else" and not is_padding_guard(call)
            return tvm_ffi.WalkResult.SKIP if guarded or is_prefetch(call) else None

        def on_load(load):
            gather = _as_gather(_substitute(load, scope), readonly)
            if gather is not None:
                found.append(gather)

        tvm_ffi.structural_walk(stmt, [(s_tir.SBlockRealize, on_realize), (tirx.For, on_for),
                                       (tvm.ir.expr.Call, on_call), (TensorLoad, on_load),
                                       ((tirx.IfThenElse, tirx.Select), lambda _: tvm_ffi.WalkResult.SKIP),
                                       (tirx.LetStmt, lambda let: inner.setdefault(let.var, None))],
                                order="pre")

    visit(loop.body, {})
    for gather in found:
        gather.inner = inner
    return found


def _as_gather(load, readonly):
    if load.source not in readonly:
        return None
    rows = [d for d, index in enumerate(load.indices)
            if isinstance(index, TensorLoad) and index.source in readonly and len(index.indices) == 1]
    return _Gather(load, rows[0], None) if len(rows) == 1 else None


def _ahead(loop, gather, distance, all_lines, analyzer, readonly) -> list:
    """Addresses (TensorLoads of D) of the row needed ``distance`` iterations of ``loop`` ahead."""
    indirect = gather.load.indices[gather.row_dim]
    position = indirect.indices[0]
    if not _uses(position, [loop.loop_var]) or _uses(position, list(gather.inner)) \
            or not _reads_only(position, readonly):
        return []
    ahead = _substitute(position, {loop.loop_var: loop.loop_var + distance})
    step = analyzer.simplify(ahead - position)
    if not (isinstance(step, tirx.IntImm) and step.value > 0):
        return []  # not a position that moves forward with the loop
    last = indirect.source.shape[0] - 1
    row = tirx.BufferLoad(indirect.source, [tirx.min(ahead, last)])
    indices = list(gather.load.indices)
    for d, index in enumerate(indices):
        if d == gather.row_dim:
            indices[d] = row
            continue
        if any(gather.inner[var] is None for var in gather.inner if _uses(index, [var])):
            return []
        indices[d] = analyzer.simplify(_substitute(index, {v: m for v, m in gather.inner.items() if m is not None}))
        if _uses(indices[d], list(gather.inner)):
            return []
    buffer = gather.load.source
    addresses = [tirx.BufferLoad(buffer, indices)]
    extent, first = buffer.shape[-1], indices[-1]
    if all_lines and gather.row_dim != len(indices) - 1 and isinstance(extent, tirx.IntImm) \
            and isinstance(first, tirx.IntImm):
        per_line = max(1, CACHE_LINE_BYTES // max(1, buffer.dtype.bits // 8))
        for offset in range(first.value + per_line, extent.value, per_line):
            addresses.append(tirx.BufferLoad(buffer, [*indices[:-1], tirx.const(offset, str(first.ty))]))
    return addresses


def _substitute(expr, values: dict):
    if not values:
        return expr
    return tvm_ffi.structural_mutate(expr, [(tirx.Var, lambda var, _m: values.get(var, var))])


def _uses(expr, variables) -> bool:
    wanted = set(variables)
    if not wanted:
        return False
    hits = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda var: hits.append(var) if var in wanted else None)])
    return bool(hits)


def _reads_only(expr, readonly) -> bool:
    """Whether every load in ``expr`` is of a read-only input (not of a buffer the kernel fills)."""
    others = []
    tvm_ffi.structural_walk(expr, [(TensorLoad, lambda load: None if load.source in readonly else others.append(load))])
    return not others
