"""DBSR: BSR without its empty block rows (doubly compressed block sparse rows).

Layout (what the kernels index): ``rows (R,)`` the sorted ids of the non-empty block rows,
``indptr (R + 1)`` over them, ``indices (nnzb)`` sorted block-column ids within each block row,
``values (nnzb, b, b)`` and ``csr_position (nnzb, b, b)`` exactly as in BSR (the shape is
padded up to multiples of the block in the same way).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import sparse_fixed
from .bsr import BlockFormat, BlockMatrix, block_slots
from .matrix import CSRMatrix
from .registry import register_format
from .slots import exclusive_cumsum


@dataclass
class DBSRMatrix(BlockMatrix):
    """Host arrays of a DBSR matrix (see the module docstring); ``shape`` is the original shape."""

    shape: tuple
    nnz: int
    block: int
    padded_shape: tuple
    rows: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    csr_position: np.ndarray

    def block_row_of_blocks(self) -> np.ndarray:
        return np.repeat(self.rows.astype(np.int64), np.diff(self.indptr))


@register_format
class DBSR(BlockFormat):
    """BSR that stores only the non-empty block rows, with their ids in ``rows``."""

    name = "dbsr"
    ops = ("spmm",)

    def _build(self, canonical: CSRMatrix, values: np.ndarray, index_dtype: str) -> DBSRMatrix:
        blocks = block_slots(canonical, values, self.block, index_dtype)
        rows, counts = np.unique(blocks.block_rows, return_counts=True)
        idtype = blocks.indices.dtype
        return DBSRMatrix(
            canonical.shape, canonical.nnz, self.block, blocks.padded_shape, rows.astype(idtype),
            exclusive_cumsum(counts).astype(idtype), blocks.indices, blocks.values, blocks.csr_position,
        )

    # -- Stage I structure: BSR whose block rows are a list of the non-empty ones --------------
    def block_rows_axis(self, source):
        """``I_dbsr = sparse_fixed(None, mb, R, distinct)``: the non-empty block rows."""
        return sparse_fixed("I_dbsr", None, source.size("mb"), source.size("rows_dbsr"), idtype=source.idtype,
                            distinct=True)

    def bind(self, matrix: DBSRMatrix, value_buffers, device: str = "cpu") -> dict:
        return {"I_dbsr_indices": matrix.rows, **super().bind(matrix, value_buffers, device)}

    def sizes(self, matrix: DBSRMatrix) -> dict:
        return {**super().sizes(matrix), "rows_dbsr": int(matrix.rows.shape[0])}
