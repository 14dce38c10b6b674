"""Queries over the block nests of a Stage III function, shared by the schedule templates.

A *nest* is one top-level block (a child of the root block) with the blocks
nested inside it: a fill, or one lowered sparse iteration. Its *leaf* is the
innermost block, which holds the stores.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import s_tir, tirx

SPATIAL = 0  # tirx.IterVar.DataPar
REDUCE = 2  # tirx.IterVar.CommReduce


@dataclass
class Nest:
    blocks: list  # SBlockRVs, outermost first (a chain: each block has one child block)

    @property
    def top(self):
        return self.blocks[0]

    @property
    def leaf(self):
        return self.blocks[-1]


def new_schedule(func: tirx.PrimFunc) -> s_tir.Schedule:
    """A schedule working on ``func`` (a Stage III PrimFunc with a global symbol)."""
    import tvm

    name = str(func.attrs["global_symbol"])
    sch = s_tir.Schedule(tvm.IRModule({name: func}))
    sch.work_on(name)
    return sch


def nests(sch: s_tir.Schedule) -> list[Nest]:
    """Top-level nests, in program order."""
    out = []
    for top in sch.get_child_blocks(sch.get_sblock("root")):
        chain = [top]
        while True:
            children = sch.get_child_blocks(chain[-1])
            if not children:
                break
            if len(children) > 1:
                raise ValueError(f"block {sch.get(chain[-1]).name_hint} has several child blocks; "
                                 f"the templates expect one nest per sparse iteration")
            chain.append(children[0])
        out.append(Nest(chain))
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


def stores(sch: s_tir.Schedule, block) -> list:
    """The BufferStores in the body of ``block`` (not its init)."""
    found = []
    tvm_ffi.structural_walk(sch.get(block).body, [(tirx.BufferStore, found.append)])
    return found


def writes_contiguously(sch: s_tir.Schedule, block, index: int) -> bool:
    """True when every store of ``block`` indexes its last dimension by exactly iterator ``index``."""
    var = sch.get(block).iter_vars[index].var
    found = stores(sch, block)
    return bool(found) and all(isinstance(s.indices[-1], tirx.Var) and s.indices[-1].same_as(var) for s in found)


def store_dtype(sch: s_tir.Schedule, block) -> str:
    return str(stores(sch, block)[0].buffer.dtype)


def first_reduce_index(sch: s_tir.Schedule, block) -> int:
    return iter_kinds(sch, block).index(REDUCE)


def dtype_bytes(dtype: str) -> int:
    return max(1, int("".join(ch for ch in dtype if ch.isdigit()) or 32) // 8)


def largest_power_of_two_dividing(value: int, cap: int) -> int:
    width = 1
    while width * 2 <= cap and value % (width * 2) == 0:
        width *= 2
    return width
