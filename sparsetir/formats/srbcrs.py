"""SR-BCRS(t, g): row tiles of ``t`` rows whose distinct columns are stored ``g`` at a time, with a mask.

Layout (what the kernels index): ``tiles = ceil(m / t)`` (the last tile is padded with rows
past ``m``). For each tile, the sorted distinct columns used by any of its rows are split
into groups of ``g``; the last group of a tile is padded with column 0 and mask 0.
``group_indptr (tiles + 1)`` counts groups per tile, ``indices (ngroups, g)`` holds the column
ids, ``values (ngroups, g, t)`` holds ``A[tile * t + r, col]`` at ``[group, slot, r]`` (0 where
A has no entry: mask 0), and ``csr_position (ngroups, g, t)`` maps each slot to CSR (-1: mask 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import dense_fixed, dense_variable, sparse_fixed
from ..runtime.validate import entry_rows
from .base import Field, Format
from .matrix import CSRMatrix
from .registry import register_format
from .slots import PADDING, SlotArray, SlotMatrix, exclusive_cumsum, index_dtype_for, rank_in_segment
from .structure import make_rule, value_params


@dataclass
class SRBCRSMatrix(SlotMatrix):
    """Host arrays of an SR-BCRS matrix (see the module docstring)."""

    shape: tuple
    nnz: int
    t: int
    g: int
    tiles: int
    group_indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    csr_position: np.ndarray

    @property
    def mask(self) -> np.ndarray:
        """``(ngroups, g, t)``: True where the slot holds an entry of A."""
        return self.csr_position >= 0

    def slot_arrays(self) -> dict:
        tile_of_group = np.repeat(np.arange(self.tiles, dtype=np.int64), np.diff(self.group_indptr))
        rows = tile_of_group[:, None, None] * self.t + np.arange(self.t, dtype=np.int64)[None, None, :]
        return {"groups": SlotArray(rows, self.indices[:, :, None], self.values, self.csr_position)}


@register_format
class SRBCRS(Format):
    """Row tiles of ``t`` rows; each tile's distinct columns in groups of ``g``."""

    name = "srbcrs"
    fields = (Field("t", doc="rows per tile"), Field("g", doc="columns per group"))
    ops = ("spmm",)
    padded = True
    dense_blocks = True

    def _build(self, canonical: CSRMatrix, values: np.ndarray, index_dtype: str) -> SRBCRSMatrix:
        t, g = self.t, self.g
        m, n = canonical.shape
        tiles = -(-m // t)
        rows = entry_rows(canonical.indptr)
        width = max(n, 1)
        # The distinct (tile, column) pairs, sorted by tile then column.
        keys, distinct = np.unique((rows // t) * width + canonical.indices, return_inverse=True)
        distinct = distinct.reshape(-1)
        tile_of_column = keys // width
        columns_per_tile = np.bincount(tile_of_column, minlength=tiles)
        group_indptr = exclusive_cumsum(-(-columns_per_tile // g))
        ngroups = int(group_indptr[-1])
        idtype = index_dtype_for(index_dtype, tiles * t + 1, n, canonical.nnz, ngroups * g * t)

        rank = rank_in_segment(exclusive_cumsum(columns_per_tile)[:-1], columns_per_tile)
        group = group_indptr[tile_of_column] + rank // g
        slot = rank % g
        indices = np.zeros((ngroups, g), dtype=idtype)
        indices[group, slot] = keys - tile_of_column * width
        group_values = np.zeros((ngroups, g, t), dtype=values.dtype)
        csr_position = np.full((ngroups, g, t), PADDING, dtype=np.int64)
        at = (group[distinct], slot[distinct], rows % t)
        group_values[at] = values
        csr_position[at] = np.arange(canonical.nnz, dtype=np.int64)
        return SRBCRSMatrix(
            (m, n), canonical.nnz, t, g, tiles, group_indptr.astype(idtype), indices, group_values, csr_position
        )

    # -- Stage I structure: tiles -> column groups -> columns, with the rows of a tile ----------
    def rewrite_rules(self, source, device: str) -> list:
        """``i = tile * t + r``; the group's columns are shared by the tile's t rows."""
        t, g = self.t, self.g
        rows, cols = source.rows, source.cols
        tiles = dense_fixed("T_sr", source.size("tiles"), idtype=source.idtype)
        group_count = source.size("groups_sr")
        groups = dense_variable("G_sr", tiles, group_count, group_count)
        group_cols = sparse_fixed("J_sr", groups, cols.length, g)
        tile_rows = dense_fixed("R_sr", t, idtype=source.idtype)
        return [make_rule(source, "sr", (tiles, groups, tile_rows, group_cols), "rcrc",
                          lambda v: {rows: v[tiles] * t + v[tile_rows], cols: v[group_cols]},
                          layout=(tiles, groups, group_cols, tile_rows), padded=True)]

    def slot_keys(self, device: str = "cpu") -> list:
        return [("sr", "groups")]

    def bind(self, matrix: SRBCRSMatrix, value_buffers, device: str = "cpu") -> dict:
        values = matrix.values.reshape(-1, self.t)
        return {"G_sr_indptr": matrix.group_indptr, "J_sr_indices": matrix.indices.reshape(-1),
                **value_params(value_buffers, "sr", values)}

    def sizes(self, matrix: SRBCRSMatrix) -> dict:
        return {"m": matrix.shape[0], "n": matrix.shape[1], "tiles": matrix.tiles,
                "groups_sr": int(matrix.indices.shape[0])}
