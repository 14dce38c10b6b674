"""The staged-tile rule of the CPU template: a tile's gather, a register-blocked product, its scatter.

A staged tile (``transform.stage_tile``; rgms over ``formats/rtile.py``) reaches Stage III as one
block per tile (annotated ``sparsetir.staged_tile``) holding two blocks: the dense product of the
tile's ``T`` slots by its relation's weights into the intermediate ``Pt``, and the scatter of
``Pt``'s rows onto the output. A block format's block row (SpMM with ``block_kernel=True``,
``transform.stage_rows``) has the same shape: the product of its blocks by the rows of B they name
into the block row's tile ``C_tile`` (reductions over the row's blocks and each block's columns), then
the tile added onto C's rows (guarded past the last row); the rule tells the two reductions from the
tile's rows and features by their iterator kinds. :func:`schedule_staged_tile` schedules them with
TVM's own dense primitives, the shape of TVM's x86 dense schedules:

* ``Pt`` goes to ``local`` scope; the scatter's rows and features are split into register blocks
  (``register_rows`` slots x ``register_vectors`` vectors of ``vector_width`` lanes) and the
  product is computed at each block (``compute_at``), so TVM's buffer compaction shrinks ``Pt``
  to one register block: accumulators that LLVM keeps in vector registers;
* in the product the reduction over ``c_in`` moves outside the register block (``reorder``), the
  block's rows and vectors are unrolled and the lanes vectorised; ``cin_split`` cuts ``c_in`` into
  chunks unrolled inside it; the zeroing of the accumulators is decomposed before the reduction;
* ``gather=True`` copies the slots' input rows into a dense ``register_rows x c_in`` tile first
  (``reindex_cache_read`` + ``compute_at``: the stage of gather-GEMM-scatter);
* the scatter adds the register block onto the output rows, vectorised.

Before (Stage III, one tile of 16 slots, c_in 16, c_out 32)::

    for s, j, l, k in T.grid(16, 1, 16, 32):
        with T.sblock("tile1_product"):      # Pt[t*16 + s, k] += A[...] * X[J[...], l] * W[r, l, k]
    for s, k in T.grid(16, 32):
        with T.sblock("scatter1_rest"):      # Y[S[...], k] += Pt[t*16 + s, k]

After ``schedule_staged_tile`` (register_rows 4, register_vectors 2, vector_width 16)::

    for s_0, k_0 in T.grid(4, 1):
        Pt_local = T.alloc_buffer((4, 32), scope="local")        # compacted: one register block
        for s, k_1 in T.grid(4, 2): for k_2 in T.vectorized(16): Pt_local[...] = 0
        for j, l in T.grid(1, 16):
            for s in T.unroll(4): for k_1 in T.unroll(2): for k_2 in T.vectorized(16):
                Pt_local[s, k_1 * 16 + k_2] += A[...] * X[J[...], l] * W[r, l, ...]
        for s_1 in T.unroll(4): for k_1 in T.unroll(2): for k_2 in T.vectorized(16):
            Y[S[...], ...] += Pt_local[s_1, k_1 * 16 + k_2]
"""

from __future__ import annotations

from tvm import s_tir, tirx

from ..lower.lower_sparse_iter import STAGED_TILE_ATTR
from .knobs import Knob, boolean, int_at_least, optional_positive_int, register_knob
from .nest import REDUCE, SPATIAL, apply_or_force, dtype_bytes, iter_kinds, largest_power_of_two_dividing, store_dtype

VECTOR_BYTES = 64


def _requires_staged(default, blocks: bool = True):
    def requires(value, fmt, device: str) -> bool:
        return value == default or getattr(fmt, "staged", False) or (blocks and getattr(fmt, "dense_blocks", False))
    return requires


_STAGED = ("it needs a tiled format (rtile) or a block format (bsr, dbsr, srbcrs with block_kernel=True), whose "
           "tiles the staged schedule runs")
for _knob in (
    Knob("register_rows", ("cpu",), 4, (4, 2, 8), int_at_least("register_rows", 1),
         "staged tiles: slots per register block of the product (the largest divisor of the tile rows up to "
         "this)", requires=_requires_staged(4), requirement=_STAGED),
    Knob("register_vectors", ("cpu",), 4, (4, 2, 1), int_at_least("register_vectors", 1),
         "staged tiles: output vectors per register block (the largest divisor of c_out / lanes up to this)",
         requires=_requires_staged(4), requirement=_STAGED),
    Knob("cin_split", ("cpu",), None, (None, 4, 8), optional_positive_int("cin_split"),
         "staged tiles: c_in cut into chunks of this many, each unrolled inside the register block (None: not "
         "cut; applied only when it divides c_in)", requires=_requires_staged(None), requirement=_STAGED),
    Knob("gather", ("cpu",), False, (False, True), boolean("gather"),
         "staged tiles: copy a register block's input rows into a dense local tile before the product",
         requires=_requires_staged(False, blocks=False), requirement="it needs a tiled format (rtile)"),
):
    register_knob(_knob)


#: the staged knobs as an op declares it searches them (``OpSpec.knobs``: each knob's own values)
STAGED_KNOBS = {"register_rows": ..., "register_vectors": ..., "cin_split": ..., "gather": ...}


def staged_tile_block(sch: s_tir.Schedule, nest):
    """The nest's staged-tile block (``sparsetir.staged_tile``), or None."""
    return next((block for block in nest.blocks if STAGED_TILE_ATTR in sch.get(block).annotations), None)


def _largest_divisor(value: int, cap: int) -> int:
    return max(d for d in range(1, max(1, min(cap, value)) + 1) if value % d == 0)


def _extent(sch, loop) -> int:
    extent = sch.get(loop).extent
    if not isinstance(extent, tirx.IntImm):
        raise ValueError("a staged tile needs constant tile rows and features")
    return int(extent.value)


def schedule_staged_tile(sch: s_tir.Schedule, tile, *, vector_width, register_rows, register_vectors, cin_split,
                         gather, unroll, forced: dict) -> None:
    """Schedule one staged tile (see the module docstring); ``tile`` is its annotated block."""
    product, scatter = sch.get_child_blocks(tile)
    sch.set_scope(product, 0, "local")
    s, k = sch.get_loops(scatter)[-2:]
    rows, features = _extent(sch, s), _extent(sch, k)
    lanes = vector_width or largest_power_of_two_dividing(features, VECTOR_BYTES // dtype_bytes(store_dtype(sch,
                                                                                                           product)))
    lanes = lanes if features % lanes == 0 else 1
    vectors = _largest_divisor(features // lanes, register_vectors)
    block_rows = _largest_divisor(rows, register_rows)
    if gather:
        x_index = next((i for i, region in enumerate(sch.get(product).reads) if region.source.name == "X"), None)
        if x_index is None:
            raise ValueError("gather=True stages the gathered input rows X of an rtile product; this tile has none")
        cache = sch.reindex_cache_read(product, x_index, "local", lambda s_, j_, l_, k_: (s_, j_, l_))
    s_outer, s_inner = sch.split(s, [None, block_rows])
    k_outer, k_block, k_lane = sch.split(k, [None, vectors, lanes])
    sch.reorder(s_outer, k_outer, s_inner, k_block, k_lane)
    sch.compute_at(product, k_outer)
    loops = sch.get_loops(product)
    at = next(i for i, loop in enumerate(loops) if sch.get(loop).same_as(sch.get(k_outer)))
    ps, pk, pj, pl = _own_loops(sch, product, loops[at + 1:])  # None where compute_at left a loop of one out
    if pk is not None and vectors > 1 and lanes > 1:
        pk_block, pk_lane = sch.split(pk, [vectors, lanes])
    else:
        pk_block, pk_lane = (None, pk) if lanes > 1 else (pk, None)
    reduce_loops = [loop for loop in (pj, pl) if loop is not None]
    split = bool(cin_split and cin_split > 1 and pl is not None and _extent(sch, pl) % cin_split == 0
                 and _extent(sch, pl) > cin_split)
    if split:
        reduce_loops[-1:] = sch.split(pl, [None, cin_split])
    inner = [loop for loop in (ps, pk_block, pk_lane) if loop is not None]
    if reduce_loops and inner:
        sch.reorder(*reduce_loops, *inner)
    if split:
        sch.unroll(reduce_loops[-1])
    if pk_lane is not None:
        _vectorize(sch, pk_lane, forced)
    if block_rows * vectors <= max(unroll, 1) * 4:
        for loop in (ps, pk_block):
            if loop is not None:
                sch.unroll(loop)
    init = sch.decompose_reduction(product, reduce_loops[0] if reduce_loops else k_outer)
    if pk_lane is not None:
        _vectorize(sch, sch.get_loops(init)[-1], forced)
    if gather:
        sch.compute_at(cache, s_outer)
        _vectorize(sch, sch.get_loops(cache)[-1], forced)
    sch.unroll(s_inner)
    sch.unroll(k_block)
    if lanes > 1:
        _vectorize(sch, k_lane, forced)


def _own_loops(sch, product, loops) -> list:
    """``[rows, features, outer reduction, inner reduction]``: the loop binding each of the product block's
    iterators, or None. The product has two spatial iterators (the tile's rows, then its features) and one or
    two reductions, in any order: rtile's ``(s, j, l, k)``, a block row's ``(j, ii, ji, k)`` (``stage_rows``)."""
    kinds = iter_kinds(sch, product)
    spatial = [index for index, kind in enumerate(kinds) if kind == SPATIAL]
    reduce = [index for index, kind in enumerate(kinds) if kind == REDUCE]
    if len(spatial) != 2 or not 1 <= len(reduce) <= 2:
        raise ValueError(f"a staged tile's product needs two spatial iterators and one or two reductions, got "
                         f"kinds {kinds}")
    found = [None] * len(kinds)
    if loops:
        realize = sch.get(loops[-1]).body
        for loop in loops:
            var = sch.get(loop).loop_var
            for index, value in enumerate(realize.iter_values):
                if any(v.same_as(var) for v in tirx.analysis.undefined_vars(value, [])):
                    found[index] = loop
    reduce = [None] * (2 - len(reduce)) + reduce  # one reduction: it is the inner one (the c_in split's)
    return [found[spatial[0]], found[spatial[1]], *(None if index is None else found[index] for index in reduce)]


def _vectorize(sch, loop, forced) -> None:
    if _extent(sch, loop) > 1:
        apply_or_force(sch, sch.vectorize, loop, tirx.ForKind.VECTORIZED, forced)
