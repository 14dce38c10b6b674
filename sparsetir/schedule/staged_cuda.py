"""The staged-tile rule of the CUDA template: a tile's gather, its product on tensor cores, its scatter.

A staged tile (``transform.stage_tile``; rgms over ``formats/rtile.py``) reaches Stage III as one
block per tile holding the dense product of the tile's slots by its relation's weights into ``Pt``
and the scatter of ``Pt``'s rows onto the output (``schedule/staged.py`` has the CPU rule). On
CUDA, with float16/bfloat16 operands and tile rows, ``c_in`` and ``c_out`` multiples of 16:

* a part of the output rows per CUDA block, one warp (``threadIdx.x``), its tiles one after the
  other (parts own disjoint rows: no atomics);
* the product as 16x16x16 ``wmma`` tiles with float32 accumulators, through the tensor intrinsics
  of sparse attention (``attention_cuda.intrinsics``): for each 16-slot row block, the slots'
  input rows are gathered into shared memory (``reindex_cache_read``: rows of X that the tile's
  columns name), and for each 16-column block of ``c_out`` the weights' ``c_in x 16`` panel; the
  fragments load from them, ``mma_sync`` runs over ``c_in`` in steps of 16, and the accumulators
  are stored to ``Pt`` in shared memory;
* the scatter: each lane owns a contiguous chunk of ``c_out`` and adds the tile's rows, scaled by
  the slots' values, onto the output in slot order (slots of one output row never race).

Anything else (float32, sizes that are no multiple of 16) is refused with a ``ValueError`` by
:func:`check_tensor_core_tile` before scheduling; ``format=None`` then keeps csf on CUDA.

A block row of a block format (SpMM over ``bsr:b``/``dbsr:b`` with ``block_kernel=True``:
``ops.spmm.tensor_core_block_function``, ``transform.stage_rows`` with a float32 tile) has the same
two blocks: the product of the row's blocks by the rows of B they name into the tile ``C_tile``
(``b x feat``), and the tile cast and added onto C's rows. :func:`schedule_block_row_cuda` runs a
block row per CUDA block, one warp:

* for each 16-row slice of the block row and each 16-column slice of the features, a float32
  accumulator fragment zeroed before the row's blocks; for each block, its ``16 x b`` slice of A and
  the ``b x 16`` panel of the B rows its column names are copied into shared memory (the warp's
  lanes over the elements; B's rows are ``nb * b``, so no bounds guard), and ``mma_sync`` runs over
  the block's columns in steps of 16; the accumulator is stored to the tile in shared memory;
* the tile is added onto C (rows past ``m`` guarded, cast to C's dtype), each lane a contiguous
  chunk of the features.

:func:`check_tensor_core_blocks` refuses, with a ``ValueError`` before anything is built, what this
does not take: float32/float64, another format (srbcrs, csr), a block or a feature count that is no
multiple of 16 (pad the features to a multiple of 16 or use ``block_kernel=False``), a matrix whose
columns are no multiple of the block.
"""

from __future__ import annotations

from tvm import tirx

from .attention_cuda import (
    TILE,
    WARP,
    _bind,
    _fragment,
    _operand_dtype,
    _stage_shared,
    _tensorize_tile,
    intrinsics,
)
from .nest import REDUCE, iter_kinds

TENSOR_CORE_DTYPES = ("float16", "bfloat16")


def check_tensor_core_tile(rows: int, f_in: int, f_out: int, dtype: str) -> None:
    """Raise ``ValueError`` unless a staged tile of ``rows`` slots, ``f_in -> f_out``, in ``dtype``
    runs on tensor cores (what the CUDA staged schedule builds)."""
    if dtype not in TENSOR_CORE_DTYPES:
        raise ValueError(f"staged tiles on CUDA run on tensor cores, which take float16 or bfloat16 operands, not "
                         f"{dtype}; use format='csf' (or format=None) for {dtype}")
    bad = [f"{name}={value}" for name, value in (("tile rows", rows), ("c_in", f_in), ("c_out", f_out))
           if value % TILE]
    if bad:
        raise ValueError(f"staged tiles on CUDA run as {TILE}x{TILE}x{TILE} wmma tiles: {', '.join(bad)} "
                         f"{'is' if len(bad) == 1 else 'are'} no multiple of {TILE}; use format='csf' (or "
                         "format=None, which falls back to it)")


def check_tensor_core_dtype(dtype: str, accum_dtype, what: str) -> None:
    """Raise ``ValueError`` unless ``dtype`` operands accumulated in ``accum_dtype`` run on tensor cores."""
    if dtype not in TENSOR_CORE_DTYPES:
        raise ValueError(f"{what} on CUDA runs on tensor cores, which take float16 or bfloat16 operands, not "
                         f"{dtype}; use block_kernel=False for {dtype}")
    if accum_dtype not in (None, "float32"):
        raise ValueError(f"{what} on CUDA accumulates in float32 (the tensor cores' accumulators), not "
                         f"{accum_dtype}")


def check_tensor_core_blocks(fmt, feat: int, dtype: str, accum_dtype=None, shape=None) -> None:
    """Raise ``ValueError`` unless SpMM over ``fmt`` with ``feat`` features in ``dtype`` (and a matrix of
    ``shape``, when given) runs its block rows on tensor cores (what :func:`schedule_block_row_cuda` builds)."""
    from ..formats.bsr import BlockFormat  # noqa: PLC0415 - formats import the schedules' knobs

    what = "block_kernel=True"
    check_tensor_core_dtype(dtype, accum_dtype, what)
    if not isinstance(fmt, BlockFormat):
        raise ValueError(f"{what} on CUDA runs bsr or dbsr blocks on tensor cores, not {fmt!r}; use bsr:b or "
                         "dbsr:b with b a multiple of 16, or block_kernel=False")
    bad = [f"{name}={value}" for name, value in (("the block", fmt.block), ("feat", feat)) if value % TILE]
    if bad:
        raise ValueError(f"{what} on CUDA runs {TILE}x{TILE}x{TILE} wmma tiles: {', '.join(bad)} "
                         f"{'is' if len(bad) == 1 else 'are'} no multiple of {TILE} (pad B's columns to a "
                         f"multiple of {TILE}, or use block_kernel=False)")
    if shape is not None and shape[1] % fmt.block:
        raise ValueError(f"{what} on CUDA reads B's rows a whole block at a time: A's {shape[1]} columns are no "
                         f"multiple of the block {fmt.block} (pad A's columns and B's rows to a multiple of it, or "
                         "use block_kernel=False)")


def _extent(sch, loop) -> int:
    extent = sch.get(loop).extent
    if not isinstance(extent, tirx.IntImm):
        raise ValueError("a staged tile needs constant tile rows and features")
    return int(extent.value)


def schedule_staged_tile_cuda(sch, nest, tile, forced: dict) -> None:
    """Schedule one staged-tile nest (see the module docstring); ``tile`` is its annotated block."""
    _bind(sch, sch.get_loops(nest.top)[0], "blockIdx.x", forced)
    product, scatter = sch.get_child_blocks(tile)
    if iter_kinds(sch, product)[0] == REDUCE:  # a block row's (j, ii, ji, k): the blocks outermost
        schedule_block_row_cuda(sch, product, scatter, forced)
        return
    s, j, l, k = sch.get_loops(product)[-4:]
    check_tensor_core_tile(_extent(sch, s), _extent(sch, l), _extent(sch, k), _operand_dtype(sch, product))
    tensor = intrinsics(_operand_dtype(sch, product))
    sch.set_scope(product, 0, "shared")
    sch.reorder_block_iter_var(product, [1, 0, 3, 2])  # (j, s, k, l): the intrinsics' (i, j, k) last
    accumulator = sch.reindex_cache_write(product, 0, "wmma.accumulator", lambda j_, s_, k_, l_: (s_, k_))
    s_outer, s_inner = sch.split(s, [None, TILE])
    k_outer, k_inner = sch.split(k, [None, TILE])
    l_outer, l_inner = sch.split(l, [None, TILE])
    sch.reorder(s_outer, k_outer, j, l_outer, s_inner, k_inner, l_inner)
    sch.reverse_compute_at(accumulator, k_outer)
    rows = _stage_shared(sch, product, "X", lambda j_, s_, k_, l_: (s_ + j_, l_), s_outer, forced)
    panel = _stage_shared(sch, product, "W", lambda j_, s_, k_, l_: (l_, k_), k_outer, forced)
    a_fragment = _fragment(sch, product, rows, "wmma.matrix_a", l_outer)
    b_fragment = _fragment(sch, product, panel, "wmma.matrix_b", l_outer)
    _tensorize_tiles(sch, tensor, sch.decompose_reduction(product, j), a_fragment, b_fragment, product, accumulator)
    _lanes_over_features(sch, scatter, forced)  # a contiguous chunk per lane (a predicate past c_out)


def schedule_block_row_cuda(sch, product, rows_block, forced: dict) -> None:
    """A block row's tile on tensor cores (see the module docstring): ``product`` sums the row's blocks
    into ``C_tile`` (iterators ``(j, ii, ji, k)``), ``rows_block`` adds the tile onto C."""
    j, ii, ji, k = sch.get_loops(product)[-4:]
    tensor = intrinsics(_operand_dtype(sch, product))
    sch.set_scope(product, 0, "shared")
    sch.reorder_block_iter_var(product, [0, 1, 3, 2])  # (j, ii, k, ji): the intrinsics' (i, j, k) last
    accumulator = sch.reindex_cache_write(product, 0, "wmma.accumulator", lambda j_, ii_, k_, ji_: (ii_, k_))
    ii_outer, ii_inner = sch.split(ii, [None, TILE])
    k_outer, k_inner = sch.split(k, [None, TILE])
    ji_outer, ji_inner = sch.split(ji, [None, TILE])
    sch.reorder(ii_outer, k_outer, j, ji_outer, ii_inner, k_inner, ji_inner)
    sch.reverse_compute_at(accumulator, k_outer)
    a_name, b_name = (next(region.source.name for region in sch.get(product).reads if region.source.name.startswith(p))
                      for p in ("A", "B"))
    a_tile = _stage_shared(sch, product, a_name, lambda j_, ii_, k_, ji_: (j_, ii_, ji_), j, forced)
    b_panel = _stage_shared(sch, product, b_name, lambda j_, ii_, k_, ji_: (j_, ji_, k_), j, forced)
    a_fragment = _fragment(sch, product, a_tile, "wmma.matrix_a", ji_outer)
    b_fragment = _fragment(sch, product, b_panel, "wmma.matrix_b", ji_outer)
    _tensorize_tiles(sch, tensor, sch.decompose_reduction(product, j), a_fragment, b_fragment, product, accumulator)
    _lanes_over_features(sch, rows_block, forced)  # a contiguous chunk per lane (a predicate past feat)


def _tensorize_tiles(sch, tensor: dict, init, a_fragment, b_fragment, product, accumulator) -> None:
    """The tile's five wmma steps: zero the accumulator, load A's and B's fragments, multiply-accumulate, store."""
    _tensorize_tile(sch, init, tensor["fill"])
    _tensorize_tile(sch, a_fragment, tensor["load_a"])
    _tensorize_tile(sch, b_fragment, tensor["load_b"])
    _tensorize_tile(sch, product, tensor["sync"], loops=3)
    _tensorize_tile(sch, accumulator, tensor["store_shared"])


def _lanes_over_features(sch, block, forced: dict) -> None:
    """``block``'s last two loops (rows, features): the features split over a warp's lanes, outermost, bound
    to ``threadIdx.x``; each lane walks the rows over its contiguous chunk."""
    rows, features = sch.get_loops(block)[-2:]
    lane, chunk = sch.split(features, [WARP, None])
    sch.reorder(lane, rows, chunk)
    _bind(sch, lane, "threadIdx.x", forced)
