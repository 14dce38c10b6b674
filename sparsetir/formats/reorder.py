"""Row reordering as a format: the kernel walks the rows in another order, for locality.

A CSR kernel gathers rows of the dense operand through each row's column indices; rows that
run one after the other on a thread reuse what their neighbours brought into the cache when
they share columns. These formats keep DCSR's structure (``rows -> the row's non-zeros``, the
row ids listed) but list the rows in a better order:

``rcm``     reverse Cuthill–McKee (``scipy.sparse.csgraph.reverse_cuthill_mckee`` on the
            pattern, symmetrised; for a rectangular matrix on ``A Aᵀ``'s pattern through the
            rows' shared columns is not formed: rows are ordered by their first column instead);
``degree``  rows by decreasing degree (long rows first, so a thread's chunk is more even).

The output is written at each row's own id, so it needs no unpermuting and the caller sees
nothing but the time; conversion (the ordering) is reported like any format's conversion.
``values=`` and per-non-zero outputs (SDDMM) keep CSR order through the slot layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .dcsr import DCSR, DCSRMatrix
from .matrix import CSRMatrix
from .registry import register_format
from .slots import SlotArray, index_dtype_for


@dataclass
class ReorderedMatrix(DCSRMatrix):
    """A DCSR matrix whose rows (and their non-zeros) are stored in another order;
    ``csr_position[p]`` is the CSR position of stored non-zero ``p``."""

    csr_position: np.ndarray | None = None

    def slot_arrays(self) -> dict:
        from ..runtime.validate import entry_rows  # noqa: PLC0415 - as dcsr.py, one helper

        row_of_entry = self.rows.astype(np.int64)[entry_rows(self.indptr)]
        return {"dcsr": SlotArray(row_of_entry, self.indices, self.values, self.csr_position)}


def reordered(canonical: CSRMatrix, values: np.ndarray, order: np.ndarray, index_dtype: str) -> ReorderedMatrix:
    """``canonical``'s non-empty rows in ``order`` (a permutation of the row ids; empty rows dropped)."""
    m, n = canonical.shape
    indptr = canonical.indptr.astype(np.int64, copy=False)
    degrees = np.diff(indptr)
    rows = order[degrees[order] > 0]
    lengths = degrees[rows]
    new_indptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    # the CSR position of every stored non-zero: each row's run, rows in the new order
    position = np.repeat(indptr[rows] - new_indptr[:-1], lengths) + np.arange(canonical.nnz, dtype=np.int64)
    idtype = index_dtype_for(index_dtype, m + 1, n, canonical.nnz)
    return ReorderedMatrix((m, n), canonical.nnz, rows.astype(idtype), new_indptr.astype(idtype),
                           np.asarray(canonical.indices)[position].astype(idtype, copy=False), values[position],
                           position)


def rcm_order(canonical: CSRMatrix) -> np.ndarray:
    """Reverse Cuthill–McKee on the symmetrised pattern (square), else rows by their first column."""
    m, n = canonical.shape
    if m == n and m:
        pattern = sp.csr_matrix((np.ones(canonical.nnz, np.int8), canonical.indices, canonical.indptr), shape=(m, n))
        from scipy.sparse.csgraph import reverse_cuthill_mckee  # noqa: PLC0415 - scipy's graph module, loaded once

        return np.asarray(reverse_cuthill_mckee(pattern, symmetric_mode=False), dtype=np.int64)
    indptr = canonical.indptr.astype(np.int64, copy=False)
    first = np.full(m, n, dtype=np.int64)
    nonempty = np.diff(indptr) > 0
    first[nonempty] = np.asarray(canonical.indices, dtype=np.int64)[indptr[:-1][nonempty]] if canonical.nnz else n
    return np.argsort(first, kind="stable")


def degree_order(canonical: CSRMatrix) -> np.ndarray:
    """Rows by decreasing degree (stable: equal degrees keep their order)."""
    degrees = np.diff(canonical.indptr.astype(np.int64, copy=False))
    return np.argsort(-degrees, kind="stable")


@register_format
class RCM(DCSR):
    """DCSR with the rows in reverse Cuthill–McKee order (see the module docstring)."""

    name = "rcm"
    tuning_order = 16
    tuning_devices = ("cpu",)  # a locality transform for CPU caches

    def _build(self, canonical: CSRMatrix, values: np.ndarray, index_dtype: str) -> ReorderedMatrix:
        return reordered(canonical, values, rcm_order(canonical), index_dtype)

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        return [cls.name] if matrix.shape[0] > 1 else []


@register_format
class DegreeOrder(DCSR):
    """DCSR with the rows by decreasing degree (see the module docstring)."""

    name = "degree"
    tuning_order = 17

    def _build(self, canonical: CSRMatrix, values: np.ndarray, index_dtype: str) -> ReorderedMatrix:
        return reordered(canonical, values, degree_order(canonical), index_dtype)

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        return []  # a load-balance experiment: not in the search space until it wins somewhere
