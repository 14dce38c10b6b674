"""CPU schedule template: parallel outer rows, a vectorised feature loop, reductions decomposed last.

Two rules, keyed on a leaf's innermost loop, and an optional third after scheduling:

* a spatial loop with contiguous writes (SpMM's feature loop): split off a vector and vectorise it;
* a reduction over a constant extent (SDDMM's dot product ``C[i, j] += X[i, k] * Y[j, k]``):
  split it into ``(ko, lanes)`` and ``rfactor`` the lanes into a small local buffer of partial
  sums, accumulated with vector instructions, then summed once per output;
* a staged tile (``transform.stage_tile``): a register-blocked dense product per tile (``staged.py``);
* a loop over positions whose leaf gathers dense rows through an index array (SpMM's
  ``B[indices[p], k]``): prefetch the row needed ``prefetch`` positions ahead (``prefetch.py``).

The knobs are declared below with ``register_knob`` (default, search values, check); the
template reads them through ``knob_settings``. ``knob_names("cpu")`` lists them.
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx

from .knobs import Knob, boolean, int_at_least, knob_settings, optional_positive_int, register_knob
from .nest import (
    REDUCE,
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
    plain_updates,
    store_dtype,
    writes_contiguously,
)
from .prefetch import check_prefetch, insert_prefetch
from .staged import schedule_staged_tile, staged_tile_block

VECTOR_BYTES = 64
REDUCE_VECTOR_BYTES = 32

for _knob in (
    Knob("vector_width", ("cpu",), None, (None, 8, 4), optional_positive_int("vector_width"),
         "lanes of the vectorised innermost spatial loop (None: a 64-byte vector, the largest power of two "
         "dividing the extent); 1 disables vectorisation"),
    Knob("parallel", ("cpu",), True, (True,), boolean("parallel"),
         "parallelise the outermost spatial loop of every nest"),
    Knob("unroll", ("cpu",), 16, (16, 0, 4, 64), int_at_least("unroll", 0),
         "unroll the loop over vectors of the feature loop (or of the reduction) when it has at most this many "
         "iterations, so LLVM keeps the accumulators in registers"),
    Knob("reduce_lanes", ("cpu",), None, (None, 4, 16), optional_positive_int("reduce_lanes"),
         "partial sums of a vectorised innermost reduction (None: a 32-byte vector, the largest power of two "
         "dividing the extent); applied only when it divides the extent; 1 keeps the scalar reduction"),
    Knob("prefetch", ("cpu",), 0, (0, 8, 16), check_prefetch,
         "software prefetch distance, in non-zeros, of the dense rows a leaf gathers through an index array "
         "(prefetch.insert_prefetch, after scheduling); 0 disables it"),
    Knob("prefetch_lines", ("cpu",), True, (True, False), boolean("prefetch_lines"),
         "prefetch every 64-byte line of such a row (True) or only its first line"),
):
    register_knob(_knob)


def schedule_cpu(func: tirx.PrimFunc, **knobs) -> tvm.IRModule:
    """Schedule every nest of a Stage III function for a multicore CPU; returns the module.

    Parameters
    ----------
    func : tirx.PrimFunc
        A Stage III function (``lower.lower``) with a global symbol.
    **knobs
        The CPU knobs (``knob_names("cpu", "schedule")``); the rest take their defaults.

    Returns
    -------
    tvm.IRModule
        The scheduled module, ready for ``tvm.compile``.
    """
    settings = knob_settings("cpu", knobs)
    staged_settings = {name: settings[name] for name in ("vector_width", "register_rows", "register_vectors",
                                                         "cin_split", "gather", "unroll")}
    vector_width, parallel, unroll = settings["vector_width"], settings["parallel"], settings["unroll"]
    reduce_lanes, prefetch, prefetch_lines = settings["reduce_lanes"], settings["prefetch"], settings["prefetch_lines"]
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
        if parallel and iter_kinds(sch, nest.top)[0] == SPATIAL and is_parallel_safe(sch, nest.top):
            # only where the lowering proved that distinct outer iterations write apart (TVM's own
            # check accepts a spatial loop whose writes collide through an index array); where it
            # refuses a proven loop (accumulation without an init), the loop is forced parallel
            outer = sch.get_loops(nest.top)[0]
            apply_or_force(sch, sch.parallel, outer, tirx.ForKind.PARALLEL, forced)
        tile = staged_tile_block(sch, nest)
        if tile is not None:  # a staged tile: gather, register-blocked product, scatter (staged.py)
            schedule_staged_tile(sch, tile, **staged_settings, forced=forced)
            continue
        for leaf in nest.leaves:
            _vectorize_feature_loop(sch, nest, leaf, vector_width, parallel, unroll, forced)
            if _vectorize_reduction(sch, leaf, reduce_lanes, unroll, forced):
                decompose_at.pop(next(i for i, block in enumerate(nest.blocks) if block is leaf), None)
        for i, index in decompose_at.items():
            block = nest.blocks[i]
            sch.decompose_reduction(block, sch.get_loops(block)[index])
    # atomic updates run as plain ones: their loops are serial, or proven to write apart
    return insert_prefetch(plain_updates(force_loop_kinds(sch.mod, forced)), prefetch, all_lines=prefetch_lines)


def _vectorize_feature_loop(sch, nest, leaf, vector_width, parallel, unroll, forced) -> None:
    last = len(iter_kinds(sch, leaf)) - 1
    if last < 0 or iter_kinds(sch, leaf)[last] != SPATIAL or (parallel and leaf is nest.top and last == 0):
        return
    extent = constant_extent(sch, leaf, last)
    if extent is None or not writes_contiguously(sch, leaf, last):
        return
    if store_dtype(sch, leaf) == "bfloat16":
        return  # TVM's bfloat16 legalisation rejects vector stores (a bf16xN store into a uint16 buffer)
    width = vector_width or largest_power_of_two_dividing(extent, VECTOR_BYTES // dtype_bytes(store_dtype(sch, leaf)))
    if width <= 1:
        return
    outer, inner = sch.split(sch.get_loops(leaf)[-1], [None, width])
    # safe: a spatial loop whose every store is indexed by it in the last dimension
    apply_or_force(sch, sch.vectorize, inner, tirx.ForKind.VECTORIZED, forced)
    if 1 < extent // width <= unroll:
        apply_or_force(sch, sch.unroll, outer, tirx.ForKind.UNROLLED, forced)


def _vectorize_reduction(sch, leaf, reduce_lanes, unroll, forced) -> bool:
    """A leaf whose innermost loop is a reduction over a constant extent: vector partial sums.

    ``k`` (extent K, bound to the leaf's last iterator) becomes ``(ko, ki)`` with ``ki`` of
    ``lanes``; ``rfactor(ki)`` accumulates ``C_rf[ki] += ...`` over ``ko`` (``ki`` spatial, so it
    is vectorised), and the leaf becomes the horizontal sum ``C += C_rf[ki]``, moved under the
    rfactor block's loops so ``C_rf`` is a ``lanes``-long local array per output. Both are
    decomposed here (init before their reduction loop). Returns whether the rule applied.
    """
    kinds = iter_kinds(sch, leaf)
    loops = sch.get_loops(leaf)
    if not kinds or kinds[-1] != REDUCE or not loops or not has_init(sch, leaf):
        return False
    extent = constant_extent(sch, leaf, len(kinds) - 1)
    realize = sch.get(loops[-1]).body
    if (extent is None or not isinstance(realize, s_tir.SBlockRealize)
            or not realize.iter_values[-1].same_as(sch.get(loops[-1]).loop_var)):
        return False
    lanes = reduce_lanes or largest_power_of_two_dividing(
        extent, REDUCE_VECTOR_BYTES // dtype_bytes(store_dtype(sch, leaf)))
    if lanes <= 1 or extent % lanes:
        return False
    if any(_runs_never(sch, loop) or sch.get(loop).loop_var in forced for loop in loops):
        return False  # reverse_compute_at cannot place a block under a loop that never runs, and
        # rfactor would copy a loop whose kind is only set after scheduling
    ko, ki = sch.split(loops[-1], [None, lanes])
    try:
        rf = sch.rfactor(ki, 0)
    except s_tir.ScheduleError:
        return False  # not a plain reduction (the split alone changes nothing)
    rf_loops = sch.get_loops(rf)  # [..., ko, ki], copies of the leaf's loops
    if len(rf_loops) > 2:
        sch.reverse_compute_at(leaf, rf_loops[-3])
    apply_or_force(sch, sch.vectorize, rf_loops[-1], tirx.ForKind.VECTORIZED, forced)
    if 1 < extent // lanes <= unroll:
        sch.unroll(rf_loops[-2])
    sch.decompose_reduction(rf, rf_loops[-2])
    # the first loop under the shared ones: the lanes, and where the bounds of the output are
    # not provable (a horizontally fused branch) also a loop over that hull, inside it
    sch.decompose_reduction(leaf, sch.get_loops(leaf)[len(rf_loops) - 2])
    return True


def _runs_never(sch, loop) -> bool:
    extent = sch.get(loop).extent
    return isinstance(extent, tirx.IntImm) and extent.value == 0
