"""DCSR: doubly compressed sparse rows, CSR without its empty rows (Buluç and Gilbert, 2008).

A hypersparse matrix (a mini-batch's sampled rows, a rectangular incidence matrix, a
pruned weight) may have most of its rows empty. CSR visits every row; DCSR stores only the
non-empty ones, with their ids, and iterates ``non-empty rows -> the row's non-zeros``; the
rows it skips get the output's initial value from a fill pass.

Layout (what the kernels index): ``rows (R,)`` the sorted ids of the non-empty rows,
``indptr (R + 1,)`` over them, and the canonical CSR ``indices (nnz,)`` and ``values
(nnz,)`` (the non-zeros stay in CSR order, so ``csr_position`` is ``0 .. nnz-1``).

This module is the whole format: the registry (``@register_format``) makes ``"dcsr"`` a format
string, a format every op written over CSR accepts, and a tuning candidate where rows are empty.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import sparse_fixed, sparse_variable
from ..runtime.validate import entry_rows
from .base import Format
from .matrix import CSRMatrix
from .registry import register_format
from .slots import SlotArray, SlotMatrix, index_dtype_for
from .structure import make_rule, value_params

TUNING_MIN_EMPTY_ROWS = 0.25  # a candidate where at least this fraction of the rows is empty


@dataclass
class DCSRMatrix(SlotMatrix):
    """Host arrays of a DCSR matrix (see the module docstring)."""

    shape: tuple
    nnz: int
    rows: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray

    def slot_arrays(self) -> dict:
        row_of_entry = self.rows.astype(np.int64)[entry_rows(self.indptr)]
        return {"dcsr": SlotArray(row_of_entry, self.indices, self.values, np.arange(self.nnz, dtype=np.int64))}


@register_format
class DCSR(Format):
    """CSR over the non-empty rows only, with the row ids in ``rows``."""

    name = "dcsr"
    tuning_order = 15

    def _build(self, canonical: CSRMatrix, values: np.ndarray, index_dtype: str) -> DCSRMatrix:
        m, n = canonical.shape
        indptr = canonical.indptr.astype(np.int64, copy=False)
        rows = np.flatnonzero(np.diff(indptr))
        idtype = index_dtype_for(index_dtype, m + 1, n, canonical.nnz)
        compressed = np.append(indptr[rows], canonical.nnz)
        return DCSRMatrix((m, n), canonical.nnz, rows.astype(idtype), compressed.astype(idtype),
                          canonical.indices.astype(idtype, copy=False), values)

    # -- Stage I structure: non-empty rows -> the row's non-zeros -----------------------------
    def rewrite_rules(self, source, device: str) -> list:
        """``I_dcsr = sparse_fixed(None, m, R, distinct)`` (the non-empty rows) and
        ``J_dcsr = sparse_variable(I_dcsr, n, nnz)``; the rows are distinct, so different rows
        write different outputs (parallel on the CPU, one row group per block on CUDA)."""
        rows, cols = source.rows, source.cols
        row_ids = sparse_fixed("I_dcsr", None, rows.length, source.size("rows_dcsr"), idtype=source.idtype,
                               distinct=True)
        nonzeros = sparse_variable("J_dcsr", row_ids, cols.length, cols.nnz)
        return [make_rule(source, "dcsr", (row_ids, nonzeros), "rc",
                          lambda v: {rows: v[row_ids], cols: v[nonzeros]})]

    def slot_keys(self, device: str = "cpu") -> list:
        return [("dcsr", "dcsr")]

    def bind(self, matrix: DCSRMatrix, value_buffers, device: str = "cpu") -> dict:
        return {"I_dcsr_indices": matrix.rows, "J_dcsr_indptr": matrix.indptr, "J_dcsr_indices": matrix.indices,
                **value_params(value_buffers, "dcsr", matrix.values)}

    def sizes(self, matrix: DCSRMatrix) -> dict:
        return {"m": matrix.shape[0], "n": matrix.shape[1], "nnz": matrix.nnz,
                "rows_dcsr": int(matrix.rows.shape[0])}

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        """``dcsr`` where at least ``TUNING_MIN_EMPTY_ROWS`` of the rows are empty."""
        degrees = np.diff(np.asarray(matrix.indptr, dtype=np.int64))
        empty = float(np.mean(degrees == 0)) if degrees.size else 0.0
        return ["dcsr"] if empty >= TUNING_MIN_EMPTY_ROWS else []
