"""Keep block access regions well-formed when indices depend on block-local state.

TVM infers each block's read/write regions from its body. A binary search keeps
its state in a block-local buffer, so regions of the searched array (and of
buffers read at the found position) mention that buffer, which does not exist
outside the block. Such regions are widened to the whole buffer, which is
exact enough for scheduling: searched arrays are only read.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir.expr import TensorLoad


def widen_local_dependent_regions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Replace regions whose bounds read block-local buffers by whole-buffer regions."""

    def on_block(block, mutator):
        block = mutator.default_mutate(block)
        local = _allocated_within(block)
        if not local:
            return block
        return s_tir.SBlock(
            block.iter_vars,
            _widen(block.reads, local),
            _widen(block.writes, local),
            block.name_hint,
            block.body,
            block.init,
            block.alloc_buffers,
            block.match_buffers,
            block.annotations,
        )

    return tvm_ffi.structural_mutate(func, [(s_tir.SBlock, on_block)])


def _allocated_within(block) -> set:
    found = set()

    def on_block(inner):
        found.update(inner.alloc_buffers)

    tvm_ffi.structural_walk(block, [(s_tir.SBlock, on_block)])
    return found


def _reads_any(expr, buffers) -> bool:
    hit = []

    def on_load(load):
        if load.source in buffers:
            hit.append(load)

    tvm_ffi.structural_walk(expr, [(TensorLoad, on_load)])
    return bool(hit)


def _widen(regions, local) -> list:
    out = []
    for region in regions:
        buffer = region.source
        if buffer in local:
            continue
        if any(_reads_any(r.min, local) or _reads_any(r.extent, local) for r in region.region):
            region = tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(0, dim) for dim in buffer.shape])
        out.append(region)
    return out
