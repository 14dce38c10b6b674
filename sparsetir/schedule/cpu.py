"""CPU schedule template: parallel outer rows, a vectorised feature loop, reductions decomposed last.

Knobs:
    vector_width  lanes of the vectorised innermost spatial loop (default: a 64-byte vector,
                  the largest power of two dividing the extent); 1 disables vectorisation
    parallel      parallelise the outermost spatial loop of every nest (default True)
    unroll        unroll the loop over vectors of the feature loop when it has at most this
                  many iterations (default 16), so LLVM keeps the accumulators in registers
"""

from __future__ import annotations

import tvm
from tvm import tirx

from .nest import (
    SPATIAL,
    apply_or_force,
    constant_extent,
    dtype_bytes,
    first_reduce_index,
    force_loop_kinds,
    has_init,
    is_fill,
    is_parallel_safe,
    iter_kinds,
    largest_power_of_two_dividing,
    nests,
    new_schedule,
    store_dtype,
    writes_contiguously,
)

VECTOR_BYTES = 64
CPU_KNOBS = ("vector_width", "parallel", "unroll")


def schedule_cpu(func: tirx.PrimFunc, *, vector_width: int | None = None, parallel: bool = True,
                 unroll: int = 16) -> tvm.IRModule:
    """Schedule every nest of a Stage III function for a multicore CPU; returns the module."""
    if vector_width is not None and (not isinstance(vector_width, int) or vector_width < 1):
        raise ValueError(f"vector_width must be a positive int, got {vector_width!r}")
    if isinstance(unroll, bool) or not isinstance(unroll, int) or unroll < 0:
        raise ValueError(f"unroll must be an int >= 0, got {unroll!r}")
    sch = new_schedule(func)
    forced: dict = {}  # loop var -> ForKind, set after scheduling where TVM's checks refuse
    for nest in nests(sch):
        if is_fill(sch, nest):
            loops = sch.get_loops(nest.top)
            fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
            if parallel:
                sch.parallel(fused)
            continue
        decompose_at = {
            i: first_reduce_index(sch, block) for i, block in enumerate(nest.blocks) if has_init(sch, block)
        }
        if parallel and iter_kinds(sch, nest.top)[0] == SPATIAL:
            outer = sch.get_loops(nest.top)[0]
            # accumulation without an init: TVM cannot prove the loop race-free, the lowering can
            apply_or_force(sch, sch.parallel, outer, tirx.ForKind.PARALLEL, forced,
                           allowed=is_parallel_safe(sch, nest.top))
        for leaf in nest.leaves:
            _vectorize_feature_loop(sch, nest, leaf, vector_width, parallel, unroll, forced)
        for i, index in decompose_at.items():
            block = nest.blocks[i]
            sch.decompose_reduction(block, sch.get_loops(block)[index])
    return force_loop_kinds(sch.mod, forced)


def _vectorize_feature_loop(sch, nest, leaf, vector_width, parallel, unroll, forced) -> None:
    last = len(iter_kinds(sch, leaf)) - 1
    if last < 0 or iter_kinds(sch, leaf)[last] != SPATIAL or (parallel and leaf is nest.top and last == 0):
        return
    extent = constant_extent(sch, leaf, last)
    if extent is None or not writes_contiguously(sch, leaf, last):
        return
    width = vector_width or largest_power_of_two_dividing(extent, VECTOR_BYTES // dtype_bytes(store_dtype(sch, leaf)))
    if width <= 1:
        return
    outer, inner = sch.split(sch.get_loops(leaf)[-1], [None, width])
    # safe: a spatial loop whose every store is indexed by it in the last dimension
    apply_or_force(sch, sch.vectorize, inner, tirx.ForKind.VECTORIZED, forced)
    if 1 < extent // width <= unroll:
        apply_or_force(sch, sch.unroll, outer, tirx.ForKind.UNROLLED, forced)
