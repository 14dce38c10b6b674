"""rcsr(parts): row-partitioned CSR, whose parts hold about equal numbers of non-zeros.

A CPU kernel over CSR parallelises its row loop, and the thread pool cuts the rows into equal
contiguous chunks. On a skewed graph the non-zeros are not spread like the rows (the first
half of dblp's rows holds 76% of its non-zeros), so one thread does most of the work. rcsr
cuts the rows into ``parts`` contiguous ranges of about ``nnz / parts`` non-zeros each and
iterates ``parts -> rows of the part -> the row's non-zeros``; the parallel loop is then over
parts of equal work.

Conversion: the boundaries are one vectorised ``np.searchsorted`` on the CSR ``indptr``: part
``p`` starts at the first row ``r`` with ``indptr[r] >= ceil(p * nnz / parts)``. So a part holds
fewer than ``ceil(nnz / parts) + max degree`` non-zeros; every row is in exactly one part; parts
may be empty (``parts > m``, or rows longer than ``nnz / parts``).

Layout (what the kernels index): ``part_indptr (parts + 1,)`` (the first row of every part),
``rows (m,)`` (the row ids, ``0 .. m-1``, listed per part), and the canonical CSR arrays
``indptr (m + 1,)``, ``indices (nnz,)``, ``values (nnz,)``; ``csr_position`` is
``0 .. nnz-1`` (the non-zeros stay in CSR order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import dense_fixed, sparse_variable
from ..runtime.loader import usable_cores
from ..runtime.validate import entry_rows
from .base import Field, Format
from .matrix import CSRMatrix
from .registry import register_format
from .slots import SlotArray, SlotMatrix, index_dtype_for
from .structure import make_rule, value_params

PARTS_PER_CORE = 8
TUNING_PARTS_PER_CORE = (1, 8)  # nnz-balanced row parts: any multiple of the thread count balances alike


@dataclass
class RCSRMatrix(SlotMatrix):
    """Host arrays of a row-partitioned CSR matrix (see the module docstring)."""

    shape: tuple
    nnz: int
    parts: int
    part_indptr: np.ndarray
    rows: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray

    @property
    def csr_position(self) -> np.ndarray:
        """Each value's entry in the canonical CSR ``data``: the identity (CSR order is kept)."""
        return np.arange(self.nnz, dtype=np.int64)

    def part_nnz(self) -> np.ndarray:
        """Non-zeros of every part."""
        return np.diff(self.indptr.astype(np.int64)[self.part_indptr])

    def slot_arrays(self) -> dict:
        return {"rcsr": SlotArray(entry_rows(self.indptr), self.indices, self.values, self.csr_position)}


@register_format
class RCSR(Format):
    """Row-partitioned CSR with ``parts`` contiguous row ranges of about equal non-zeros.

    ``parts=None``: ``8 x`` the usable cores (see ``default_parts``); ``resolve(A)`` makes it
    explicit. The compiled kernel does not depend on ``parts`` (it is a runtime size), so every
    value of ``parts`` shares one kernel.
    """

    name = "rcsr"
    fields = (Field("parts", default=None),)
    tuning_order = 10

    def resolve(self, A) -> RCSR:
        return self if self.parts is not None else RCSR(default_parts())

    def structure_key(self) -> tuple:
        """``("rcsr",)``: the number of parts is a size of the kernel, not part of its structure."""
        return (self.name,)

    def rows_disjoint(self) -> bool:
        """Every row lies in exactly one part."""
        return True

    def _build(self, canonical: CSRMatrix, values: np.ndarray, index_dtype: str) -> RCSRMatrix:
        m, n = canonical.shape
        parts = self.parts if self.parts is not None else default_parts()
        idtype = index_dtype_for(index_dtype, m + 1, n, canonical.nnz, parts + 1)
        indptr = canonical.indptr.astype(np.int64, copy=False)
        part_indptr = balanced_row_bounds(indptr, parts)
        return RCSRMatrix((m, n), canonical.nnz, parts, part_indptr.astype(idtype), np.arange(m, dtype=idtype),
                          indptr.astype(idtype), canonical.indices.astype(idtype, copy=False), values)

    # -- Stage I structure: parts -> rows of the part -> the row's non-zeros ---------------
    def rewrite_rules(self, source, device: str) -> list:
        """``T_rcsr = dense_fixed(parts)``, ``R_rcsr = sparse_variable(T_rcsr, m, m, distinct,
        disjoint)`` (the row ids of each part) and ``J_rcsr = sparse_variable(R_rcsr, n, nnz)``.

        Each row is in one part, so ``R_rcsr`` is distinct and disjoint: the lowering proves that
        different parts write different rows (the parts loop runs in parallel without a race)
        and that the one rule initialises every row it writes, in place, with no fill pass.
        """
        rows, cols = source.rows, source.cols
        parts = dense_fixed("T_rcsr", source.size("parts_rcsr"), source.idtype)
        row_ids = sparse_variable("R_rcsr", parts, rows.length, rows.length, distinct=True, disjoint=True)
        nonzeros = sparse_variable("J_rcsr", row_ids, cols.length, cols.nnz)
        return [make_rule(source, "rcsr", (parts, row_ids, nonzeros), "rrc",
                          lambda v: {rows: v[row_ids], cols: v[nonzeros]}, owns_rows=True)]

    def slot_keys(self, device: str = "cpu") -> list:
        return [("rcsr", "rcsr")]

    def bind(self, matrix: RCSRMatrix, value_buffers, device: str = "cpu") -> dict:
        return {
            "R_rcsr_indptr": matrix.part_indptr,
            "R_rcsr_indices": matrix.rows,
            "J_rcsr_indptr": matrix.indptr,
            "J_rcsr_indices": matrix.indices,
            **value_params(value_buffers, "rcsr", matrix.values),
        }

    def sizes(self, matrix: RCSRMatrix) -> dict:
        return {"m": matrix.shape[0], "n": matrix.shape[1], "nnz": matrix.nnz, "parts_rcsr": matrix.parts}

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        """One and eight parts per usable core."""
        return [f"rcsr:{k * usable_cores()}" for k in TUNING_PARTS_PER_CORE]


def balanced_row_bounds(indptr: np.ndarray, parts: int) -> np.ndarray:
    """``parts + 1`` row boundaries: part ``p`` is rows ``[b[p], b[p + 1])`` and starts at the first
    row whose first entry is at or past ``ceil(p * nnz / parts)`` (int64)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    m, nnz = indptr.shape[0] - 1, int(indptr[-1])
    targets = -(-np.arange(parts + 1, dtype=np.int64) * nnz // parts)
    bounds = np.searchsorted(indptr, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, m
    return np.minimum(bounds, m)


def default_parts() -> int:
    """``8 x`` the cores this process may use: enough parts to balance any thread count up to it."""
    return PARTS_PER_CORE * max(usable_cores(), 1)
