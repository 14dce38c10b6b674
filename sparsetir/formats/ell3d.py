"""ell3d(buckets): per relation, the rows bucketed by degree into ELLs (the paper's R-GCN format).

Each relation's non-empty rows go to the smallest bucket whose width holds their degree; a row
longer than the largest width becomes several ELL rows of that width (consecutive, one row id).
So every bucket ``b`` is a relation-outermost ELL: relations -> the ELL rows of that relation
(row ids) -> ``width_b`` slots (padding: column 0, value -0.0, which the op skips: ``ir.padding``). The op iterates the buckets one
after the other (a format in parts, ``relational.RelationalFormat``); relations write the same
output rows, so the relation loop is a reduction: serial on the CPU, atomic on CUDA.

Layout of bucket ``b`` (suffix ``_b<b>``): ``I_b<b>_indptr (R + 1,)`` (ELL rows per relation),
``I_b<b>_indices (rows_b,)`` (their row ids), ``J_b<b>_indices (rows_b * width_b,)`` and the
values ``A_b<b>`` likewise; a ``SlotLayout`` keeps each slot's input entry (-1: padding).
"""

from __future__ import annotations

import numpy as np

from ..ir import dense_fixed, size_vars, sparse_fixed, sparse_variable
from ..runtime.slot_layout import SlotLayout, mark_padding
from .base import Field, positive_int
from .registry import register_format
from .relational import RelationalAxes, RelationalFormat, RelationalMatrix, check_relational, read_relational_input

MAX_DEFAULT_WIDTH = 32


def _checked_widths(widths) -> tuple:
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__"):
        raise ValueError(f"ELL3D: buckets must be a list of integer widths, got {widths!r}")
    widths = tuple(positive_int(w, owner="ELL3D", name="bucket width") for w in widths)
    if not widths or any(a >= b for a, b in zip(widths, widths[1:])):
        raise ValueError(f"ELL3D: bucket widths must be a non-empty, strictly increasing list, got {list(widths)}")
    return widths


def _row_degrees(matrix: RelationalMatrix) -> np.ndarray:
    """Entries of every (relation, row), relation-major."""
    return np.diff(np.asarray(matrix.indptr, dtype=np.int64))


@register_format
class ELL3D(RelationalFormat):
    """Per relation, ELL buckets of the given widths (default: 1, 2, 4, ... up to the largest
    (relation, row) degree, capped at 32)."""

    name = "ell3d"
    fields = (Field("buckets", "ints", default=None, item="bucket width", check=_checked_widths),)
    tuning_order = 120
    rows_outermost = False

    def resolve(self, A) -> ELL3D:
        if self.buckets is not None:
            return self
        degrees = _row_degrees(read_relational_input(A))
        top = min(max(int(degrees.max(initial=1)), 1), MAX_DEFAULT_WIDTH)
        return ELL3D(tuple(1 << i for i in range((top - 1).bit_length() + 1)))

    def structure(self, idtype: str, device: str) -> list[RelationalAxes]:
        if self.buckets is None:
            raise ValueError("ELL3D: resolve(A) the buckets before building the structure")
        nrel, m, n = size_vars("nrel m n", idtype)
        relations = dense_fixed("R", nrel, idtype)
        parts = []
        for b, width in enumerate(self.buckets):
            (count,) = size_vars(f"rows_b{b}", idtype)
            rows = sparse_variable(f"I_b{b}", relations, m, count)
            cols = sparse_fixed(f"J_b{b}", rows, n, width)
            parts.append(RelationalAxes((relations, rows, cols), rows, relations, cols, atomic=True,
                                        values=f"A_b{b}", suffix=f"_b{b}", padded=True))
        return parts

    def build(self, matrix: RelationalMatrix, index_dtype: str):
        check_relational(matrix)
        fmt = self.resolve(matrix)
        widths = np.asarray(fmt.buckets, dtype=np.int64)
        idtype = self.index_dtype(matrix, index_dtype)
        m, n = matrix.shape
        R = matrix.num_relations
        degrees = _row_degrees(matrix)
        stacked = np.flatnonzero(degrees)  # (relation, row) with entries, relation-major
        lengths = degrees[stacked]
        bucket = np.minimum(np.searchsorted(widths, lengths, side="left"), widths.size - 1)
        pieces = np.where(lengths > widths[-1], -(-lengths // widths[-1]), 1)
        starts = np.asarray(matrix.indptr, dtype=np.int64)[stacked]
        arrays, sizes, values, positions = {}, {"nrel": R, "m": m, "n": n}, {}, {}
        for b, width in enumerate(fmt.buckets):
            chosen = bucket == b
            count = pieces[chosen]
            ell_rows = int(count.sum())
            stacked_rows = np.repeat(stacked[chosen], count)  # one per ELL row
            piece = np.arange(ell_rows, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
            first = np.repeat(starts[chosen], count) + piece * width  # input entry of each ELL row's slot 0
            last = np.repeat(starts[chosen] + lengths[chosen], count)
            slot = first[:, None] + np.arange(width, dtype=np.int64)[None, :]
            stored = slot < last[:, None]
            position = np.where(stored, slot, -1)
            per_relation = np.bincount(stacked_rows // max(m, 1), minlength=R) if ell_rows else np.zeros(R, np.int64)
            indptr = np.zeros(R + 1, dtype=np.int64)
            np.cumsum(per_relation, out=indptr[1:])
            column = np.where(stored, np.asarray(matrix.indices, dtype=np.int64)[np.where(stored, slot, 0)]
                              if matrix.nnz else 0, 0)
            value = np.where(stored, np.asarray(matrix.values)[np.where(stored, slot, 0)] if matrix.nnz else 0, 0)
            arrays[f"I_b{b}_indptr"] = indptr.astype(idtype)
            arrays[f"I_b{b}_indices"] = (stacked_rows % max(m, 1)).astype(idtype)
            arrays[f"J_b{b}_indices"] = column.reshape(-1).astype(idtype)
            values[f"A_b{b}"] = mark_padding(value.reshape(-1).astype(matrix.values.dtype), position.reshape(-1))
            positions[f"A_b{b}"] = position.reshape(-1)
            sizes[f"rows_b{b}"] = ell_rows
        arrays.update(values)
        return arrays, sizes, SlotLayout(matrix.nnz, positions, {})

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        return [cls.name]
