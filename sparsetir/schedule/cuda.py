"""CUDA schedule template: row groups to blocks, feature lanes to threads, each lane a contiguous chunk.

For nests whose innermost blocks end in a constant spatial loop (the feature loop
of SpMM), rows are split into ``rows_per_block`` rows per CUDA block
(``threadIdx.y``) and the features into ``lanes`` lanes (``threadIdx.x``), each
lane owning a contiguous chunk (a strided split corrupts the cached write-back,
TVM.md pitfall 7) accumulated in registers. A horizontally fused nest gets the
same mapping for every member, all in one launch. Other nests map their outer
spatial loop to ``threads`` threads per block.

The knobs (``rows_per_block``, ``lanes``, ``threads``) are declared below with
``register_knob`` and read through ``knob_settings``.
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx

from .knobs import Knob, int_at_least, knob_settings, register_knob
from .nest import (
    SPATIAL,
    accumulates_only_atomically,
    apply_or_force,
    constant_extent,
    first_reduce_index,
    force_loop_kinds,
    has_atomics,
    has_init,
    is_fill,
    is_fused_group,
    is_parallel_safe,
    iter_kinds,
    largest_power_of_two_dividing,
    nests,
    new_schedule,
    writes_contiguously,
)
from .staged import staged_tile_block

VECTOR_CHUNKS = (2, 4)  # float2 / float4

for _knob in (
    Knob("rows_per_block", ("cuda",), 4, (4, 1, 2, 8, 16), int_at_least("rows_per_block", 1, 1024),
         "rows per CUDA block (threadIdx.y) of a nest with a feature loop"),
    Knob("lanes", ("cuda",), 32, (32, 8, 16), int_at_least("lanes", 1, 1024),
         "feature lanes (threadIdx.x), each owning a contiguous chunk of the features"),
    Knob("threads", ("cuda",), 128, (128, 64, 256), int_at_least("threads", 1, 1024),
         "threads per block of the other nests (their outer spatial loop)"),
):
    register_knob(_knob)


def schedule_cuda(func: tirx.PrimFunc, **knobs) -> tvm.IRModule:
    """Schedule every nest of a Stage III function for CUDA; returns the module.

    ``knobs``: the CUDA knobs (``knob_names("cuda", "schedule")``); the rest take their defaults.
    """
    settings = knob_settings("cuda", knobs)
    rows_per_block, lanes, threads = settings["rows_per_block"], settings["lanes"], settings["threads"]
    sch = new_schedule(func)
    forced: dict = {}  # loop var -> thread tag / ForKind, set after scheduling where TVM's checks refuse
    for nest in nests(sch):
        if is_fill(sch, nest):
            loops = sch.get_loops(nest.top)
            _bind_threads(sch, sch.fuse(*loops) if len(loops) > 1 else loops[0], threads, forced)
            continue
        tile = staged_tile_block(sch, nest)
        if tile is not None:  # a staged tile: gather, tensor-core product, scatter (staged_cuda.py)
            from .staged_cuda import schedule_staged_tile_cuda  # noqa: PLC0415 - imports the wmma intrinsics

            schedule_staged_tile_cuda(sch, nest, tile, forced)
            continue
        name = sch.get(nest.top).name_hint
        if not (is_parallel_safe(sch, nest.top) or is_fused_group(sch, nest.top)
                or accumulates_only_atomically(sch, nest)):
            raise ValueError(
                f"block {name}: instances of its outer loop may write the same output element, and the CUDA "
                "template runs them in parallel; declare the iteration atomic=True (its reductions are then "
                "atomic)")
        if iter_kinds(sch, nest.top)[0] != SPATIAL:
            # a reduction outermost (a relation or scatter loop): every update is atomic (checked
            # above), so its instances run in parallel; an in-place init would be wrong there
            if any(has_init(sch, b) for b in nest.blocks):
                raise ValueError(f"block {name}: a reduction-outermost nest that initialises in place")
            _bind_threads(sch, _fuse_outer(sch, nest.top), threads, forced)
            continue
        if all(_is_feature_leaf(sch, nest, leaf) for leaf in nest.leaves) and not any(
                has_init(sch, b) for b in nest.blocks if b not in nest.leaves):
            row_outer, row_inner = sch.split(sch.get_loops(nest.top)[0], [None, rows_per_block])
            _bind(sch, row_outer, "blockIdx.x", forced)
            _bind(sch, row_inner, "threadIdx.y", forced)
            for leaf in nest.leaves:
                _feature_lanes(sch, leaf, lanes, forced)
        else:
            decompose_at = {b: first_reduce_index(sch, b) for b in nest.blocks if has_init(sch, b)}
            _bind_threads(sch, sch.get_loops(nest.top)[0], threads, forced)
            for block, index in decompose_at.items():
                sch.decompose_reduction(block, sch.get_loops(block)[index])
    return force_loop_kinds(sch.mod, forced)


def _fuse_outer(sch, top):
    """The loops around the nest's top block, fused into one where TVM allows it (else the outermost)."""
    loops = sch.get_loops(top)
    if len(loops) == 1:
        return loops[0]
    try:
        return sch.fuse(*loops)
    except s_tir.ScheduleError:
        return loops[0]


def _bind(sch, loop, tag: str, forced: dict) -> None:
    """Bind ``loop`` to ``tag``; the lowering guarantees the nests' iterations write apart
    (or write atomically), so a refusal by TVM's dataflow check is overridden."""
    apply_or_force(sch, lambda l: sch.bind(l, tag), loop, tag, forced)


def _bind_threads(sch, loop, threads: int, forced: dict) -> None:
    outer, inner = sch.split(loop, [None, threads])
    _bind(sch, outer, "blockIdx.x", forced)
    _bind(sch, inner, "threadIdx.x", forced)


def _is_feature_leaf(sch, nest, leaf) -> bool:
    kinds = iter_kinds(sch, leaf)
    last = len(kinds) - 1
    return (leaf is not nest.top and last >= 0 and kinds[last] == SPATIAL
            and constant_extent(sch, leaf, last) is not None and writes_contiguously(sch, leaf, last))


def _feature_lanes(sch, leaf, lanes: int, forced: dict) -> None:
    """Feature loop to ``threadIdx.x`` lanes, each owning a contiguous chunk kept in registers."""
    extent = constant_extent(sch, leaf, len(iter_kinds(sch, leaf)) - 1)
    reduce_index = first_reduce_index(sch, leaf) if has_init(sch, leaf) else None
    vectorize = not has_atomics(sch, leaf)  # atomicAdd is scalar
    lane_count = largest_power_of_two_dividing(extent, lanes)
    leaf_loops = sch.get_loops(leaf)
    lane, chunk = sch.split(leaf_loops[-1], [lane_count, None])
    sch.reorder(lane, *leaf_loops[:-1], chunk)
    _bind(sch, lane, "threadIdx.x", forced)
    chunk_size = extent // lane_count
    if vectorize and chunk_size in VECTOR_CHUNKS:
        apply_or_force(sch, sch.vectorize, chunk, tirx.ForKind.VECTORIZED, forced)
    # a register copy of the outputs needs a fixed size: not where another spatial loop of the
    # block has a data-dependent extent (ell3d's rows per relation); that reduction runs in place
    fixed = all(constant_extent(sch, leaf, index) is not None for index, kind in enumerate(iter_kinds(sch, leaf))
                if kind == SPATIAL)
    if reduce_index is not None and not fixed:
        sch.decompose_reduction(leaf, sch.get_loops(leaf)[reduce_index + 1])
    elif reduce_index is not None:
        write_back = sch.cache_write(leaf, 0, "local")
        sch.reverse_compute_at(write_back, lane)
        if chunk_size in VECTOR_CHUNKS:
            sch.vectorize(sch.get_loops(write_back)[-1])
        sch.decompose_reduction(leaf, sch.get_loops(leaf)[reduce_index + 1])
