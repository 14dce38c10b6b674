"""Queries over the block nests of a Stage III function, shared by the schedule templates.

A *nest* is one top-level block (a child of the root block) with the blocks
nested inside it: a fill, one lowered sparse iteration, or a horizontally fused
group of iterations (one top block, one branch per member). Its *leaves* are
the innermost blocks, which hold the stores.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..lower.lower_sparse_buffer import ATOMIC_PREFIX, FUSED_GROUP_ATTR, PARALLEL_SAFE_ATTR, combine

SPATIAL = 0  # tirx.IterVar.DataPar
REDUCE = 2  # tirx.IterVar.CommReduce
ATOMIC_ADD = "tirx.cuda.atomic_add"
CALL_EXTERN = "tirx.call_extern"


def atomic_reducer(call) -> str | None:
    """The reducer ("sum", "max", "min") of an atomic update the lowering emitted, else None."""
    name = getattr(call.op, "name", None)
    if name == ATOMIC_ADD:
        return "sum"
    if name == CALL_EXTERN and call.args and isinstance(call.args[0], tvm.ir.expr.StringImm) \
            and call.args[0].value.startswith(ATOMIC_PREFIX):
        return call.args[0].value[len(ATOMIC_PREFIX):]
    return None


@dataclass
class Nest:
    blocks: list  # SBlockRVs of the whole nest, outermost first
    leaves: list  # the blocks without child blocks

    @property
    def top(self):
        return self.blocks[0]


def new_schedule(func: tirx.PrimFunc) -> s_tir.Schedule:
    """A schedule working on ``func`` (a Stage III PrimFunc with a global symbol)."""
    name = str(func.attrs["global_symbol"])
    sch = s_tir.Schedule(tvm.IRModule({name: func}))
    sch.work_on(name)
    return sch


def all_blocks(sch: s_tir.Schedule) -> list:
    """Every block under the root, parents before their children (depth first, in program order)."""
    found = []

    def visit(block_rv):
        for child in sch.get_child_blocks(block_rv):
            found.append(child)
            visit(child)

    visit(sch.get_sblock("root"))
    return found


def loop_extent(sch: s_tir.Schedule, loop) -> int | None:
    """The extent of ``loop`` when it is a constant."""
    extent = sch.get(loop).extent
    return int(extent.value) if isinstance(extent, tirx.IntImm) else None


SCOPE_SUFFIX = "_scope"


def nests(sch: s_tir.Schedule) -> list[Nest]:
    """Top-level nests, in program order (looking through the per-nest scope blocks)."""
    out = []
    tops = []
    for child in sch.get_child_blocks(sch.get_sblock("root")):
        tops.extend(sch.get_child_blocks(child) if _is_scope(sch, child) else [child])
    for top in tops:
        blocks, leaves, todo = [], [], [top]
        while todo:
            block = todo.pop(0)
            children = sch.get_child_blocks(block)
            if _is_scope(sch, block) and block is not top:
                todo = list(children) + todo  # a fused member's scope block: look through it
                continue
            blocks.append(block)
            if not children:
                leaves.append(block)
            todo = list(children) + todo
        out.append(Nest(blocks, leaves))
    return out


def _is_scope(sch: s_tir.Schedule, block_rv) -> bool:
    block = sch.get(block_rv)
    return not block.iter_vars and block.name_hint.endswith(SCOPE_SUFFIX)


def iter_kinds(sch: s_tir.Schedule, block) -> list[int]:
    return [int(iv.iter_type) for iv in sch.get(block).iter_vars]


def constant_extent(sch: s_tir.Schedule, block, index: int) -> int | None:
    """The extent of the block's ``index``-th iterator when it is a constant."""
    extent = sch.get(block).iter_vars[index].dom.extent
    return int(extent.value) if isinstance(extent, tirx.IntImm) else None


def has_init(sch: s_tir.Schedule, block) -> bool:
    return sch.get(block).init is not None


def is_fill(sch: s_tir.Schedule, nest: Nest) -> bool:
    return len(nest.blocks) == 1 and sch.get(nest.top).name_hint.endswith("_fill")


def is_fused_group(sch: s_tir.Schedule, block) -> bool:
    """A horizontally fused group's top block: the lowering made its colliding members atomic."""
    return FUSED_GROUP_ATTR in sch.get(block).annotations


def is_parallel_safe(sch: s_tir.Schedule, block) -> bool:
    """The lowering proved that the block's outer-loop iterations write disjoint outputs."""
    return PARALLEL_SAFE_ATTR in sch.get(block).annotations


def updates(sch: s_tir.Schedule, block) -> list[tuple]:
    """``(buffer, indices, atomic)`` of every store and atomic add in the block's body."""
    found = []

    def on_store(store):
        found.append((store.buffer, list(store.indices), False))

    def on_call(call):
        reducer = atomic_reducer(call)
        if reducer is not None:
            address = call.args[0] if reducer == "sum" else call.args[1]
            target = address.args[0]  # address_of(buffer[indices])
            found.append((target.source, list(target.indices), True))

    tvm_ffi.structural_walk(sch.get(block).body, [(tirx.BufferStore, on_store), (tvm.ir.expr.Call, on_call)])
    return found


def writes_contiguously(sch: s_tir.Schedule, block, index: int) -> bool:
    """True when every update of ``block`` indexes its last dimension by exactly iterator ``index``."""
    var = sch.get(block).iter_vars[index].var
    found = updates(sch, block)
    return bool(found) and all(isinstance(i[-1], tirx.Var) and i[-1].same_as(var) for _, i, _ in found)


def has_atomics(sch: s_tir.Schedule, block) -> bool:
    return any(atomic for _, _, atomic in updates(sch, block))


def accumulates_only_atomically(sch: s_tir.Schedule, nest) -> bool:
    """Every update of the nest's leaves is atomic (so parallel instances may collide)."""
    found = [u for leaf in nest.leaves for u in updates(sch, leaf)]
    return bool(found) and all(atomic for _, _, atomic in found)


def plain_updates(mod: tvm.IRModule) -> tvm.IRModule:
    """The lowering's atomic updates as plain read-modify-writes (``C[i] = C[i] + v``, ``max``, ``min``),
    for loops that run one instance at a time or are proven to write apart (the CPU template)."""

    def on_evaluate(stmt, mutator):
        call = stmt.value
        reducer = atomic_reducer(call) if isinstance(call, tvm.ir.expr.Call) else None
        if reducer is None:
            return mutator.default_mutate(stmt)
        address, value = (call.args[0], call.args[1]) if reducer == "sum" else (call.args[1], call.args[2])
        target = address.args[0]
        current = tirx.BufferLoad(target.source, list(target.indices))
        return tirx.BufferStore(target.source, combine(reducer, current, value), list(target.indices))

    return tvm_ffi.structural_mutate(mod, [(tirx.Evaluate, on_evaluate)])


def store_dtype(sch: s_tir.Schedule, block) -> str:
    return str(updates(sch, block)[0][0].dtype)


def first_reduce_index(sch: s_tir.Schedule, block) -> int:
    return iter_kinds(sch, block).index(REDUCE)


def dtype_bytes(dtype: str) -> int:
    return max(1, int("".join(ch for ch in dtype if ch.isdigit()) or 32) // 8)


def apply_or_force(sch, primitive, loop, kind, forced: dict, *, allowed: bool = True) -> None:
    """``primitive(loop)``, or, where TVM refuses a block that accumulates without an init and the
    transformation is known to be safe, record ``kind`` for ``force_loop_kinds`` after scheduling."""
    try:
        primitive(loop)
    except s_tir.ScheduleError:
        if not allowed:
            return
        forced[sch.get(loop).loop_var] = kind


def largest_power_of_two_dividing(value: int, cap: int) -> int:
    width = 1
    while width * 2 <= cap and value % (width * 2) == 0:
        width *= 2
    return width


def force_loop_kinds(mod: tvm.IRModule, kinds: dict) -> tvm.IRModule:
    """Set the kind (a ``ForKind``, or a thread tag to bind) of the loops whose variables are the keys.

    For loops the lowering proved safe (``PARALLEL_SAFE_ATTR``, or a spatial feature loop with
    contiguous writes) where TVM's primitives refuse blocks that accumulate without an init.
    """
    if not kinds:
        return mod

    def on_for(loop, mutator):
        loop = mutator.default_mutate(loop)
        kind = next((k for var, k in kinds.items() if var.same_as(loop.loop_var)), None)
        if kind is None:
            return loop
        binding = loop.thread_binding
        if isinstance(kind, str):  # a thread tag such as "threadIdx.x"
            dom = tvm.ir.Range.from_min_extent(loop.min, loop.extent)
            binding = tirx.IterVar(dom, tirx.Var(kind, str(loop.loop_var.ty)), tirx.IterVar.ThreadIndex, kind)
            kind = tirx.ForKind.THREAD_BINDING
        return tirx.For(loop.loop_var, loop.min, loop.extent, kind, loop.body, binding, loop.annotations)

    return tvm_ffi.structural_mutate(mod, [(tirx.For, on_for)])
