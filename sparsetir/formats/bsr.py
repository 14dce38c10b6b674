"""BSR: block sparse rows with square ``block x block`` blocks.

Layout (what the kernels index): the shape is padded up to multiples of the block,
``padded_shape = (mb * b, nb * b)``; ``indptr (mb + 1)`` over block rows, ``indices (nnzb)``
the sorted block-column ids of each block row, ``values (nnzb, b, b)`` indexed
``[block, row in block, column in block]`` with zeros where A has no entry, and
``csr_position (nnzb, b, b)`` (-1 where A has no entry; explicit zeros of A are mapped).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import dense_fixed, sparse_variable
from ..runtime.validate import entry_rows
from .base import Field, Format
from .matrix import CSRMatrix
from .registry import register_format
from .slots import PADDING, SlotArray, SlotMatrix, exclusive_cumsum, index_dtype_for
from .structure import make_rule, value_params

TUNING_BLOCKS = (4, 8, 16)
TUNING_MIN_FILL = 0.25  # a block size is a candidate when its blocks are at least this full on average


@dataclass
class BlockSlots:
    """The non-empty blocks of a matrix, in (block row, block column) order."""

    block: int
    padded_shape: tuple
    block_rows: np.ndarray  # (nnzb,) int64
    indices: np.ndarray  # (nnzb,) block-column ids
    values: np.ndarray  # (nnzb, b, b)
    csr_position: np.ndarray  # (nnzb, b, b)


def block_slots(canonical: CSRMatrix, values: np.ndarray, block: int, index_dtype: str) -> BlockSlots:
    """Every stored entry placed in its ``block x block`` block (vectorised; one sort of the block keys)."""
    m, n = canonical.shape
    mb, nb = -(-m // block), -(-n // block)
    rows = entry_rows(canonical.indptr)
    cols = canonical.indices.astype(np.int64, copy=False)
    keys, slot = np.unique((rows // block) * nb + cols // block, return_inverse=True)
    nnzb = keys.shape[0]
    if block > max(m, n, 1) and nnzb * block * block > 2**31 - 1:
        raise ValueError(f"block {block} is larger than the {m} x {n} matrix itself: each of its {nnzb} block(s) "
                         f"would hold {block * block:,} slots; use a block of at most {max(m, n, 1)}")
    idtype = index_dtype_for(index_dtype, mb * block + 1, nb * block, canonical.nnz, nnzb * block * block)
    block_values = np.zeros((nnzb, block, block), dtype=values.dtype)
    csr_position = np.full((nnzb, block, block), PADDING, dtype=np.int64)
    at = (slot.reshape(-1), rows % block, cols % block)
    block_values[at] = values
    csr_position[at] = np.arange(canonical.nnz, dtype=np.int64)
    block_rows = keys // max(nb, 1)
    block_cols = (keys - block_rows * nb).astype(idtype)
    return BlockSlots(block, (mb * block, nb * block), block_rows, block_cols, block_values, csr_position)


class BlockMatrix(SlotMatrix):
    """What BSR and DBSR matrices share: slots of ``values (nnzb, b, b)`` at ``block_row_of_blocks()``."""

    def block_row_of_blocks(self) -> np.ndarray:
        raise NotImplementedError

    def slot_arrays(self) -> dict:
        b = self.block
        offsets = np.arange(b, dtype=np.int64)
        rows = self.block_row_of_blocks()[:, None, None] * b + offsets[None, :, None]
        cols = self.indices.astype(np.int64)[:, None, None] * b + offsets[None, None, :]
        return {"blocks": SlotArray(rows, cols, self.values, self.csr_position)}

    def padding_inside_shape(self) -> bool:
        """Whether a padding slot of a stored block lies inside the matrix's shape (an entry of a block that
        A does not store). Block-pruned weights have none: their padding is only past a shape the block
        does not divide, where the rows are not written and B's rows past ``n`` read as 0, so SpMM needs
        no padding guard (``ops.spmm``'s ``padding_guard=None``)."""
        (slots,) = self.slot_arrays().values()
        m, n = self.shape
        return bool(np.any((slots.csr_position == PADDING) & (slots.rows < m) & (slots.cols < n)))


@dataclass
class BSRMatrix(BlockMatrix):
    """Host arrays of a BSR matrix (see the module docstring); ``shape`` is the original shape."""

    shape: tuple
    nnz: int
    block: int
    padded_shape: tuple
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    csr_position: np.ndarray

    def block_row_of_blocks(self) -> np.ndarray:
        return entry_rows(self.indptr)


class BlockFormat(Format):
    """What BSR and DBSR share: one parameter, the block size (>= 1), and the block structure."""

    fields = (Field("block", default=16),)
    padded = True
    dense_blocks = True

    def block_rows_axis(self, source):
        """The axis of block rows (its name is ``I_<format name>``)."""
        raise NotImplementedError

    # -- Stage I structure: block rows -> block columns -> rows and columns inside a block -----
    def rewrite_rules(self, source, device: str) -> list:
        """``i = io * b + ii`` and ``j = jo * b + ji``; rows and columns past the shape are guarded."""
        b, suffix = self.block, self.name
        rows, cols = source.rows, source.cols
        block_rows = self.block_rows_axis(source)
        block_cols = sparse_variable(f"J_{suffix}", block_rows, source.size("nb"), source.size("nnzb"))
        inner_rows = dense_fixed(f"II_{suffix}", b, idtype=source.idtype)
        inner_cols = dense_fixed(f"JI_{suffix}", b, idtype=source.idtype)
        loops = (block_rows, block_cols, inner_rows, inner_cols)
        return [make_rule(source, suffix, loops, "rcrc", lambda v: {
            rows: v[block_rows] * b + v[inner_rows], cols: v[block_cols] * b + v[inner_cols]}, padded=True)]

    def slot_keys(self, device: str = "cpu") -> list:
        return [(self.name, "blocks")]

    def bind(self, matrix, value_buffers, device: str = "cpu") -> dict:
        return {f"J_{self.name}_indptr": matrix.indptr, f"J_{self.name}_indices": matrix.indices,
                **value_params(value_buffers, self.name, matrix.values)}

    def sizes(self, matrix) -> dict:
        b = self.block
        return {"m": matrix.shape[0], "n": matrix.shape[1], "mb": matrix.padded_shape[0] // b,
                "nb": matrix.padded_shape[1] // b, "nnzb": int(matrix.indices.shape[0])}


@register_format
class BSR(BlockFormat):
    """Block sparse rows with ``block x block`` blocks; a shape the block does not divide is padded."""

    name = "bsr"
    tuning_order = 40

    def _build(self, canonical: CSRMatrix, values: np.ndarray, index_dtype: str) -> BSRMatrix:
        blocks = block_slots(canonical, values, self.block, index_dtype)
        block_count = blocks.padded_shape[0] // self.block
        indptr = exclusive_cumsum(np.bincount(blocks.block_rows, minlength=block_count))
        return BSRMatrix(
            canonical.shape, canonical.nnz, self.block, blocks.padded_shape,
            indptr.astype(blocks.indices.dtype), blocks.indices, blocks.values, blocks.csr_position,
        )

    def block_rows_axis(self, source):
        return dense_fixed("I_bsr", source.size("mb"), idtype=source.idtype)

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        """The block sizes of ``TUNING_BLOCKS`` whose blocks are on average ``TUNING_MIN_FILL`` full."""
        n = matrix.shape[1]
        rows = entry_rows(matrix.indptr)
        cols = np.asarray(matrix.indices, dtype=np.int64)
        choices = []
        for block in TUNING_BLOCKS:
            blocks = np.unique((rows // block) * (n // block + 1) + cols // block).size
            if blocks and matrix.nnz / (blocks * block * block) >= TUNING_MIN_FILL:
                choices.append(f"bsr:{block}")
        return choices
