"""ELL: every row padded to one width; with a capped width, the overflow stays in a CSR remainder.

Layout (what the kernels index): ``indices (m, width)``, ``values (m, width)`` and
``csr_position (m, width)``. Row ``r`` holds its first ``min(deg, width)`` entries in column
order, then padding (column 0, value 0, position -1). ``remainder`` is an m-row CSR matrix of
each row's entries beyond ``width`` (empty when ``width`` >= the maximum degree).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import sparse_fixed, sparse_variable
from ..runtime.validate import entry_rows
from .base import Field, Format
from .matrix import CSRMatrix, read_sparse_input
from .registry import register_format
from .slots import PADDING, SlotArray, SlotMatrix, index_dtype_for
from .structure import make_rule, value_params

TUNING_QUANTILES = (0.5, 0.9)  # capped ELL widths the tuner tries: these degree quantiles


@dataclass
class ELLMatrix(SlotMatrix):
    """Host arrays of an ELL matrix (see the module docstring)."""

    shape: tuple
    nnz: int
    width: int
    indices: np.ndarray
    values: np.ndarray
    csr_position: np.ndarray
    remainder: CSRMatrix
    remainder_position: np.ndarray

    def slot_arrays(self) -> dict:
        rows = np.arange(self.shape[0], dtype=np.int64)
        return {
            "ell": SlotArray(rows[:, None], self.indices, self.values, self.csr_position),
            "remainder": SlotArray(
                np.repeat(rows, np.diff(self.remainder.indptr)),
                self.remainder.indices,
                self.remainder.values,
                self.remainder_position,
            ),
        }


@register_format
class ELL(Format):
    """ELL with ``width`` slots per row; ``None`` means the maximum degree (at least 1)."""

    name = "ell"
    fields = (Field("width", default=None),)
    tuning_order = 20
    padded = True

    def resolve(self, A) -> ELL:
        """``ELL(width)`` with the maximum degree of ``A`` filled in (unchanged when already set)."""
        if self.width is not None:
            return self
        return ELL(max_degree(read_sparse_input(A, canonical=True).indptr))

    def _build(self, canonical: CSRMatrix, values: np.ndarray, index_dtype: str) -> ELLMatrix:
        m, n = canonical.shape
        indptr = canonical.indptr.astype(np.int64, copy=False)
        width = self.width if self.width is not None else max_degree(indptr)
        idtype = index_dtype_for(index_dtype, m + 1, n, canonical.nnz, m * width)
        rows = entry_rows(indptr)
        rank = np.arange(canonical.nnz, dtype=np.int64) - indptr[rows]
        in_ell = rank < width
        ell_rows, ell_rank = rows[in_ell], rank[in_ell]
        positions = np.flatnonzero(in_ell)

        indices = np.zeros((m, width), dtype=idtype)
        ell_values = np.zeros((m, width), dtype=values.dtype)
        csr_position = np.full((m, width), PADDING, dtype=np.int64)
        indices[ell_rows, ell_rank] = canonical.indices[in_ell]
        ell_values[ell_rows, ell_rank] = values[in_ell]
        csr_position[ell_rows, ell_rank] = positions

        overflow = ~in_ell
        remainder_position = np.flatnonzero(overflow)
        remainder_indptr = np.zeros(m + 1, dtype=idtype)
        np.cumsum(np.maximum(np.diff(indptr) - width, 0), out=remainder_indptr[1:])
        remainder = CSRMatrix(
            (m, n), remainder_indptr, canonical.indices[overflow].astype(idtype), values[overflow]
        )
        return ELLMatrix((m, n), canonical.nnz, width, indices, ell_values, csr_position, remainder, remainder_position)

    # -- Stage I structure: an ELL part over the rows plus a CSR remainder ------------------
    def rewrite_rules(self, source, device: str) -> list:
        """``J_ell = sparse_fixed(I, n, width)`` (covers every row) and ``J_rem = sparse_variable(I, n, nnz_rem)``."""
        rows, cols = source.rows, source.cols
        ell = sparse_fixed("J_ell", rows, cols.length, self.structure_key()[1])
        rem = sparse_variable("J_rem", rows, cols.length, source.size("nnz_rem"))
        together = device == "cuda"  # one launch: the parts race on shared rows
        return [
            make_rule(source, "ell", (rows, ell), "rc", lambda v: {rows: v[rows], cols: v[ell]},
                      atomic=together, covers_output=not together, padded=True),
            make_rule(source, "rem", (rows, rem), "rc", lambda v: {rows: v[rows], cols: v[rem]}, atomic=together),
        ]

    def slot_keys(self, device: str = "cpu") -> list:
        return [("ell", "ell"), ("rem", "remainder")]

    def bind(self, matrix: ELLMatrix, value_buffers, device: str = "cpu") -> dict:
        return {
            "J_ell_indices": matrix.indices.reshape(-1),
            "J_rem_indptr": matrix.remainder.indptr,
            "J_rem_indices": matrix.remainder.indices,
            **value_params(value_buffers, "ell", matrix.values.reshape(-1)),
            **value_params(value_buffers, "rem", matrix.remainder.values),
        }

    def sizes(self, matrix: ELLMatrix) -> dict:
        return {"m": matrix.shape[0], "n": matrix.shape[1], "nnz_rem": matrix.remainder.nnz}

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        """Widths at the degree quantiles ``TUNING_QUANTILES``, rounded up to powers of two."""
        return [f"ell:{width}" for width in degree_quantile_widths(matrix)]



def degree_quantile_widths(matrix, quantiles=TUNING_QUANTILES) -> list[int]:
    """Capped widths: each degree quantile rounded up to a power of two, at most the maximum degree."""
    degrees = np.diff(np.asarray(matrix.indptr, dtype=np.int64))
    top = int(degrees.max(initial=0))
    widths = {min(1 << max(0, int(np.ceil(np.quantile(degrees, q))) - 1).bit_length(), top) for q in quantiles}
    return sorted(widths - {0}) if degrees.size else []


def max_degree(indptr: np.ndarray) -> int:
    """The largest row degree, at least 1."""
    return max(int(np.diff(indptr).max(initial=0)), 1)
