"""Position arithmetic of one axis inside its chain, shared by both lowering passes.

A chain ``I -> J -> ...`` is stored flat: every axis numbers its positions
consecutively over all parent positions (its *offset*). For a child axis:

    dense/sparse_variable:  offset = indptr[parent_offset] + position
    sparse_fixed:           offset = parent_offset * nnz_cols + position
"""

from __future__ import annotations

from tvm import tirx

from ..ir.axis import Axis


def row_range(axis: Axis, parent_offset) -> tuple:
    """Offsets [lo, hi) of ``axis`` under one parent position (the whole axis for a root)."""
    if axis.parent is None:
        return tirx.const(0, axis.idtype), axis.chain_size()
    if axis.is_variable:
        return axis.indptr[parent_offset], axis.indptr[parent_offset + 1]
    lo = parent_offset * axis.nnz_cols
    return lo, lo + axis.nnz_cols


def position_extent(axis: Axis, parent_offset):
    """Number of positions of ``axis`` under one parent position (its loop extent)."""
    if axis.parent is None:
        return axis.chain_size()
    if axis.is_variable:
        lo, hi = row_range(axis, parent_offset)
        return hi - lo
    return axis.nnz_cols


def chain_offset(axis: Axis, parent_offset, position):
    """Offset of ``position`` of ``axis`` within its whole chain."""
    if axis.parent is None:
        return position
    return row_range(axis, parent_offset)[0] + position


def coordinate(axis: Axis, offset, position):
    """Coordinate at a position: the stored index for sparse axes, the position for dense ones."""
    if axis.is_sparse:
        return axis.indices[offset]
    return position


def buffer_offsets(buffer, positions) -> list:
    """One flat index per chain of ``buffer`` (its Stage III dimensions)."""
    offsets = []
    parent_offset = None
    for axis, position in zip(buffer.axes, positions):
        offset = chain_offset(axis, parent_offset, position)
        if axis.parent is None:
            offsets.append(offset)
        else:
            offsets[-1] = offset
        parent_offset = offset
    return offsets


def zero(dtype: str):
    return tirx.const(0, dtype)
