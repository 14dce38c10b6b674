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

from ..lower.lower_sparse_buffer import PARALLEL_SAFE_ATTR

SPATIAL = 0  # tirx.IterVar.DataPar
REDUCE = 2  # tirx.IterVar.CommReduce
ATOMIC_ADD = "tirx.cuda.atomic_add"


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


def nests(sch: s_tir.Schedule) -> list[Nest]:
    """Top-level nests, in program order."""
    out = []
    for top in sch.get_child_blocks(sch.get_sblock("root")):
        blocks, leaves, todo = [], [], [top]
        while todo:
            block = todo.pop(0)
            blocks.append(block)
            children = sch.get_child_blocks(block)
            if not children:
                leaves.append(block)
            todo = list(children) + todo
        out.append(Nest(blocks, leaves))
    return out


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


def is_parallel_safe(sch: s_tir.Schedule, block) -> bool:
    """The lowering proved that the block's outer-loop iterations write disjoint outputs."""
    return PARALLEL_SAFE_ATTR in sch.get(block).annotations


def updates(sch: s_tir.Schedule, block) -> list[tuple]:
    """``(buffer, indices, atomic)`` of every store and atomic add in the block's body."""
    found = []

    def on_store(store):
        found.append((store.buffer, list(store.indices), False))

    def on_call(call):
        if getattr(call.op, "name", None) == ATOMIC_ADD:
            target = call.args[0].args[0]  # address_of(buffer[indices])
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


def store_dtype(sch: s_tir.Schedule, block) -> str:
    return str(updates(sch, block)[0][0].dtype)


def first_reduce_index(sch: s_tir.Schedule, block) -> int:
    return iter_kinds(sch, block).index(REDUCE)


def dtype_bytes(dtype: str) -> int:
    return max(1, int("".join(ch for ch in dtype if ch.isdigit()) or 32) // 8)


def largest_power_of_two_dividing(value: int, cap: int) -> int:
    width = 1
    while width * 2 <= cap and value % (width * 2) == 0:
        width *= 2
    return width


def force_parallel(mod: tvm.IRModule, block_names: set) -> tvm.IRModule:
    """Mark the outermost loop above each named top-level block parallel.

    For nests the lowering proved race-free (``PARALLEL_SAFE_ATTR``) but whose
    accumulation without an init TVM's ``parallel`` primitive refuses.
    """

    def top_block_name(loop) -> str | None:
        node = loop
        while isinstance(node, tirx.For):
            node = node.body
        return node.block.name_hint if isinstance(node, s_tir.SBlockRealize) else None

    def on_for(loop, mutator):
        if top_block_name(loop) in block_names:
            return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.PARALLEL, loop.body,
                            loop.thread_binding, loop.annotations)
        return mutator.default_mutate(loop)

    return tvm_ffi.structural_mutate(mod, [(tirx.For, on_for)])

