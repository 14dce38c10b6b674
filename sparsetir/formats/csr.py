"""CSR: the format every op is written over; it needs no rewriting.

Stage I structure: ``I = dense_fixed(m)``, ``J = sparse_variable(I, n, nnz)`` with
metadata ``J_indptr`` and ``J_indices``.
"""

from __future__ import annotations

from .base import Format
from .matrix import CSRMatrix, cast_values, read_sparse_input
from .registry import register_format


@register_format
class CSR(Format):
    """Compressed sparse rows."""

    name = "csr"
    tuning_order = 0
    rewrites = False

    def structure_key(self) -> tuple:
        return (self.name,)

    def convert(self, A, *, dtype: str = "float32", index_dtype: str = "int32", canonical: bool = False) -> CSRMatrix:
        """Host arrays of ``A`` with values in ``dtype`` and indices in ``index_dtype``."""
        matrix = A if isinstance(A, CSRMatrix) else read_sparse_input(A, canonical=canonical)
        return CSRMatrix(
            matrix.shape,
            matrix.indptr.astype(index_dtype, copy=False),
            matrix.indices.astype(index_dtype, copy=False),
            cast_values(matrix.values, dtype),
        )

    def rewrite_rules(self, source, device: str) -> list:
        """None: ops are written over CSR, so CSR needs no rewriting."""
        return []

    def sub_format_count(self) -> int:
        return 0

    def bind(self, matrix: CSRMatrix, value_buffers, device: str = "cpu") -> dict:
        """Kernel parameters for the structure (and values) of ``matrix``."""
        return {"J_indptr": matrix.indptr, "J_indices": matrix.indices,
                **{name: matrix.values for name in value_buffers}}

    def sizes(self, matrix: CSRMatrix) -> dict:
        return {"m": matrix.shape[0], "n": matrix.shape[1], "nnz": matrix.nnz}

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        return ["csr"]
