"""rtile(rows, parts): a relational input as dense tiles of pairs, one relation per tile (staged rgms).

The output rows are cut into ``parts`` contiguous ranges holding about as many entries each; a
part's entries are grouped by relation, and every (part, relation) group is cut into tiles of
``rows`` slots, one stored entry (an (output row, input row) pair) per slot. So a tile is a dense
``rows x f_in`` block of gathered input rows, all multiplied by one ``W[r]``: the unit the staged
schedule (``schedule/staged.py``) runs through its register-blocked micro-kernel, before it adds
the tile's result rows onto the output. Parts own disjoint output rows, so they run in parallel
with no atomics; within a part the tiles run one after another.

Axes: ``P`` (parts, dense) -> ``T`` (the part's tiles; coordinate: the tile's relation) -> ``S``
(``rows`` slots; coordinate: the output row) -> ``J`` (one column per slot; coordinate: the input
row). A tile's last slots may be padding: value 0, the output row and column of its first slot
(rows of its own part, so a padded slot adds 0 to a row its part owns).

Layout: ``T_indptr (parts + 1,)``, ``T_indices (tiles,)`` (relation per tile), ``S_indices (tiles *
rows,)`` (output rows), ``J_indices (tiles * rows,)`` (input rows) and the values ``A`` likewise;
a ``SlotLayout`` keeps each slot's relation-major input entry (-1: padding).
"""

from __future__ import annotations

import numpy as np

from ..ir import dense_fixed, size_vars, sparse_fixed, sparse_variable
from ..runtime.slot_layout import SlotLayout, mark_padding
from .base import Field
from .registry import register_format
from .relational import RelationalAxes, RelationalFormat, RelationalMatrix, check_relational

DEFAULT_ROWS = 16
DEFAULT_PARTS = 8


def part_bounds(row_counts: np.ndarray, parts: int) -> np.ndarray:
    """``parts + 1`` row boundaries cutting the rows into contiguous ranges of about equal entries."""
    m = row_counts.size
    cumulative = np.cumsum(row_counts, dtype=np.int64)
    total = int(cumulative[-1]) if m else 0
    targets = (np.arange(1, parts, dtype=np.int64) * total) // parts
    inner = np.searchsorted(cumulative, targets, side="right") if m else np.zeros(parts - 1, np.int64)
    return np.r_[0, np.maximum.accumulate(inner), m].astype(np.int64)


@register_format
class RTile(RelationalFormat):
    """Parts of the output rows -> tiles of ``rows`` pairs, one relation each -> one column per slot."""

    name = "rtile"
    fields = (Field("rows", default=DEFAULT_ROWS, doc="slots (pairs) per tile"),
              Field("parts", default=DEFAULT_PARTS, doc="contiguous output-row parts, run in parallel"))
    tuning_order = 130
    tuning_devices = ("cpu",)
    staged = True  # rgms computes each tile as a dense product (ops.rgms, transform.stage_tile)

    def structure(self, idtype: str, device: str) -> RelationalAxes:
        nrel, m, n, tiles = size_vars("nrel m n tiles", idtype)
        parts = dense_fixed("P", self.parts, idtype)
        relations = sparse_variable("T", parts, nrel, tiles)
        rows = sparse_fixed("S", relations, m, self.rows)
        cols = sparse_fixed("J", rows, n, 1)
        return RelationalAxes((parts, relations, rows, cols), rows, relations, cols, atomic=False, padded=True)

    def build(self, matrix: RelationalMatrix, index_dtype: str):
        check_relational(matrix)
        idtype = self.index_dtype(matrix, index_dtype)
        m, n = matrix.shape
        R, T = matrix.num_relations, self.rows
        relation, row, col = matrix.coordinates()
        bounds = part_bounds(np.bincount(row, minlength=m), self.parts)
        part = np.searchsorted(bounds, row, side="right") - 1
        order = np.lexsort((col, row, relation, part))  # by part, then relation, then output row and column
        group = (part * R + relation)[order]
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if order.size else np.zeros(0, np.int64)
        sizes = np.diff(np.r_[starts, order.size])
        tiles_per_group = -(-sizes // T)
        first_tile = np.cumsum(tiles_per_group) - tiles_per_group
        within = np.arange(order.size, dtype=np.int64) - np.repeat(starts, sizes)
        slot = np.repeat(first_tile, sizes) * T + within  # every entry's slot (tile * T + position in it)
        tiles = int(tiles_per_group.sum())
        tile_first_entry = np.repeat(starts, tiles_per_group) + (
            np.arange(tiles, dtype=np.int64) - np.repeat(first_tile, tiles_per_group)) * T
        position = np.full(tiles * T, -1, dtype=np.int64)
        position[slot] = order
        # padding: the tile's first entry's row and column (its own part's row), value -0.0 (skipped: ir.padding)
        filler = np.repeat(order[tile_first_entry] if tiles else np.zeros(0, np.int64), T)
        source = np.where(position >= 0, position, filler)
        values = np.where(position >= 0, np.asarray(matrix.values)[source] if matrix.nnz else 0, 0)
        group_part = group[starts] // max(R, 1)
        T_indptr = np.zeros(self.parts + 1, dtype=np.int64)
        np.cumsum(np.bincount(group_part, weights=tiles_per_group, minlength=self.parts).astype(np.int64),
                  out=T_indptr[1:])
        arrays = {"T_indptr": T_indptr.astype(idtype),
                  "T_indices": (group[starts] % max(R, 1)).repeat(tiles_per_group).astype(idtype),
                  "S_indices": row[source].astype(idtype) if tiles else np.zeros(0, idtype),
                  "J_indices": col[source].astype(idtype) if tiles else np.zeros(0, idtype),
                  "A": mark_padding(values.astype(matrix.values.dtype), position)}
        sizes_ = {"nrel": R, "m": m, "n": n, "tiles": tiles}
        return arrays, sizes_, SlotLayout(matrix.nnz, {"A": position}, {})

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        return [f"{cls.name}:{rows}:{DEFAULT_PARTS}" for rows in (16, 32, 8)]
