"""csf: compressed sparse fibers of a relational input, rows outermost (I -> R -> J).

Each row lists the relations it has edges of, and each (row, relation) its columns: a CSR whose
"columns" are relations, over a CSR of columns (the paper's row-major relational CSR). Rows are
outermost, so the row loop runs in parallel with no atomics.

Layout: ``R_indptr (m + 1,)`` and ``R_indices (pairs,)`` (sorted relation ids per row),
``J_indptr (pairs + 1,)``, ``J_indices (nnz,)`` (sorted columns per (row, relation)), values in
that order; ``value_order`` maps each stored entry back to the relation-major input.
"""

from __future__ import annotations

import numpy as np

from ..ir import dense_fixed, size_vars, sparse_variable
from .registry import register_format
from .relational import RelationalAxes, RelationalFormat, RelationalMatrix, check_relational


@register_format
class CSF(RelationalFormat):
    """Rows -> the relations each row has -> stored columns."""

    name = "csf"
    tuning_order = 100

    def structure(self, idtype: str, device: str) -> RelationalAxes:
        nrel, m, n, pairs, nnz = size_vars("nrel m n pairs nnz", idtype)
        rows = dense_fixed("I", m, idtype)
        relations = sparse_variable("R", rows, nrel, pairs, distinct=True)
        cols = sparse_variable("J", relations, n, nnz)
        return RelationalAxes((rows, relations, cols), rows, relations, cols, atomic=False)

    def build(self, matrix: RelationalMatrix, index_dtype: str):
        check_relational(matrix)
        idtype = self.index_dtype(matrix, index_dtype)
        m, n = matrix.shape
        relation, row, col = matrix.coordinates()
        order = np.lexsort((col, relation, row))  # row-major: by row, then relation, then column (stable)
        pair_keys = row[order] * max(matrix.num_relations, 1) + relation[order]
        starts = np.flatnonzero(np.r_[True, pair_keys[1:] != pair_keys[:-1]]) if order.size else np.zeros(0, np.int64)
        pair_rows = row[order][starts]
        R_indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(np.bincount(pair_rows, minlength=m), out=R_indptr[1:])
        arrays = {"R_indptr": R_indptr.astype(idtype), "R_indices": relation[order][starts].astype(idtype),
                  "J_indptr": np.r_[starts, order.size].astype(idtype), "J_indices": col[order].astype(idtype),
                  "A": np.asarray(matrix.values)[order]}
        sizes = {"nrel": matrix.num_relations, "m": m, "n": n, "pairs": int(starts.size), "nnz": matrix.nnz}
        return arrays, sizes, order

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        return [cls.name]
