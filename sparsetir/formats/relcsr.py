"""relcsr: per-relation CSR, the relations outermost (R -> I -> J), as R-GCN implementations loop.

Layout: the relation-major stacking itself (``relational.RelationalMatrix``): ``I_indptr (R + 1,)``
(every relation has all m rows: ``r * m``), ``J_indptr (R*m + 1,)``, ``J_indices (nnz,)``, values
in relation-major order. Different relations write the same output rows, so the relation loop
is a reduction: serial on the CPU, atomic on CUDA.
"""

from __future__ import annotations

import numpy as np

from ..ir import dense_fixed, dense_variable, size_vars, sparse_variable
from .registry import register_format
from .relational import RelationalAxes, RelationalFormat, RelationalMatrix, check_relational


@register_format
class RelCSR(RelationalFormat):
    """Per-relation CSR: relations -> rows -> stored columns."""

    name = "relcsr"
    tuning_order = 110
    rows_outermost = False

    def structure(self, idtype: str, device: str) -> RelationalAxes:
        nrel, m, n, nnz, rows = size_vars("nrel m n nnz rows", idtype)
        relations = dense_fixed("R", nrel, idtype)
        row_axis = dense_variable("I", relations, m, rows)
        cols = sparse_variable("J", row_axis, n, nnz)
        return RelationalAxes((relations, row_axis, cols), row_axis, relations, cols, atomic=True)

    def build(self, matrix: RelationalMatrix, index_dtype: str):
        check_relational(matrix)
        idtype = self.index_dtype(matrix, index_dtype)
        m, n = matrix.shape
        R = matrix.num_relations
        arrays = {"I_indptr": (np.arange(R + 1, dtype=np.int64) * m).astype(idtype),
                  "J_indptr": np.asarray(matrix.indptr).astype(idtype),
                  "J_indices": np.asarray(matrix.indices).astype(idtype), "A": matrix.values}
        sizes = {"nrel": R, "m": m, "n": n, "nnz": matrix.nnz, "rows": R * m}
        return arrays, sizes, None

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        return [cls.name]
