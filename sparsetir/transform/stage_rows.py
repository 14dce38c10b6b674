"""``stage_rows``: accumulate each outer row (a block row) in a local tile, then add it onto the output
(Stage I -> Stage I).

Requires: the iteration's outermost loop is spatial, it has a reduction, and it has one store, a
sum (``+=``) that reads nothing of its own target, not atomic, with no ``accum_dtype``; its loops
are plain axes (no fused group). Its spatial axes become the axes of a new intermediate ``<C>_tile``:
the iteration sums into the tile (which starts from 0), and a second iteration ``<name>_rows``
over the spatial axes adds the tile onto the output, keeping the iteration's ``init`` (the output's
fill) and the store's indices (the guards of padded rows). The pair is staged per position of the
outermost axis (:func:`stage_tile`, depth 1), so after lowering the tile is one block row's
``rows x features`` accumulator that the CPU template register-blocks (``schedule/staged.py``).

Before (Stage I, SpMM over ``bsr:b`` after ``format_decompose``)::

    with sparse_iteration([I_bsr, J_bsr, II_bsr, JI_bsr, K], 'SRSRS', name='spmm_bsr'):
        C[i_bsr * b + ii_bsr, k] += A_bsr[i_bsr, j_bsr, ii_bsr, ji_bsr] * B[j_bsr * b + ji_bsr, k]

After ``stage_rows(func, 'spmm_bsr')``::

    with sparse_iteration([I_bsr, J_bsr, II_bsr, JI_bsr, K], 'SRSRS', name='spmm_bsr'):
        C_tile[i_bsr, ii_bsr, k] += A_bsr[i_bsr, j_bsr, ii_bsr, ji_bsr] * B[j_bsr * b + ji_bsr, k]
    with sparse_iteration([I_bsr, II_bsr, K], 'SSS', name='spmm_bsr_rows'):
        C[i_bsr * b + ii_bsr, k] += C_tile[i_bsr, ii_bsr, k]
    # staged: stage_tile(..., 'spmm_bsr', 'spmm_bsr_rows', depth=1)

and in Stage II, one block row ``i`` at a time (``C_tile`` is allocated in the tile block)::

    for i_bsr in grid(mb):
        with block('spmm_bsr0', kinds='S', parallel_safe=True, staged_tile, local=C_tile):
            for j_bsr, ii_bsr, ji_bsr, k in grid(J_indptr[i + 1] - J_indptr[i], b, b, feat):
                with block('spmm_bsr1_product', kinds='RSRS'):
                    with init(): C_tile[ii_bsr, k] = 0
                    C_tile[ii_bsr, k] += A_bsr[...] * B[...]
            for ii_bsr, k in grid(b, feat):
                with block('spmm_bsr_rows0_rest', kinds='SS'):
                    if i_bsr * b + ii_bsr < m: C[i_bsr * b + ii_bsr, k] += C_tile[ii_bsr, k]
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx
from tvm.ir.expr import TensorLoad

from ..ir import IDENTITY, SparseBuffer, SparseFunction, SparseIteration, SparseStore, cast
from ..ir.axis import FusedAxis, expr_dtype
from .select_iteration import select_iteration
from .stage_tile import stage_tile

TILE_DTYPES = ("float32", "float64")


def stage_rows(func: SparseFunction, iteration: str | None = None, tile_dtype: str | None = None) -> SparseFunction:
    """A copy of ``func`` whose ``iteration`` sums each outer row into a local tile added onto the output.

    Parameters
    ----------
    func : SparseFunction
        Holds the iteration.
    iteration : str, optional
        Its name (default: the only iteration).
    tile_dtype : str, optional
        The tile's dtype (default: the output's). A wider tile under a half-precision output (float16
        operands, float32 tile: the tensor cores' accumulators) sums the value in the tile's dtype (a
        value ``cast(output dtype, x)`` with ``x`` in the tile's dtype sums ``x``) and casts each tile
        element once where it is added onto the output.

    Returns
    -------
    SparseFunction
        ``func`` with the iteration split into the tile's sum and ``<name>_rows``, staged per outer row.
    """
    index, it = select_iteration(func, iteration)
    if len(it.stores) != 1:
        raise ValueError(f"stage_rows: iteration {it.name} must have one store, got {len(it.stores)}")
    (store,) = it.stores
    if store.reducer != "sum" or it.atomic or it.accum_dtype is not None:
        raise ValueError(f"stage_rows: iteration {it.name} must be a plain sum (+=), not atomic, without "
                         f"accum_dtype")
    tile_dtype = store.buffer.dtype if tile_dtype is None else tile_dtype
    if tile_dtype not in TILE_DTYPES:
        raise ValueError(f"stage_rows: the tile of {store.buffer.name} must be one of {TILE_DTYPES}, got "
                         f"{tile_dtype}")
    if any(isinstance(group, FusedAxis) for group in it.groups):
        raise ValueError(f"stage_rows: iteration {it.name} iterates a fused group; stage it before sparse_fuse")
    if it.kinds[0] != "S" or "R" not in it.kinds:
        raise ValueError(f"stage_rows: iteration {it.name} needs a spatial outermost loop and a reduction, got "
                         f"kinds {it.kinds!r}")
    if _reads(store.value, store.buffer):
        raise ValueError(f"stage_rows: iteration {it.name} reads its output {store.buffer.name} in the value")
    spatial = [axis for axis, kind in zip(it.axes, it.kinds) if kind == "S"]
    variables = tuple(it.var_of(axis) for axis in spatial)
    tile = SparseBuffer(f"{store.buffer.name}_tile", spatial, tile_dtype)
    value = store.value
    if isinstance(value, tirx.Cast) and expr_dtype(value.value) == tile_dtype:
        value = value.value  # cast(output dtype, x): the tile sums x
    elif expr_dtype(value) != tile_dtype:
        value = cast(value, tile_dtype)
    added = tirx.BufferLoad(tile.coordinate_view, list(variables))
    if tile_dtype != store.buffer.dtype:
        added = cast(added, store.buffer.dtype)
    product = SparseIteration(it.name, it.groups, it.kinds, it.iter_vars,
                              [SparseStore(tile, variables, value, "sum")], IDENTITY,
                              [tile if buffer is store.buffer else buffer for buffer in it.buffers])
    rows = SparseIteration(f"{it.name}_rows", spatial, "S" * len(spatial), variables,
                           [SparseStore(store.buffer, store.indices, added, "sum")],
                           it.init, [tile, store.buffer], init_scope=it.init_scope)
    iterations = list(func.iterations[:index]) + [product, rows] + list(func.iterations[index + 1:])
    staged = SparseFunction(func.name, iterations, func.buffers, func.fused_groups, func.tiles)
    return stage_tile(staged, it.name, rows.name, depth=1)


def _reads(expr, buffer: SparseBuffer) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(TensorLoad, lambda load: found.append(load.source.same_as(
        buffer.coordinate_view)))])
    return any(found)
