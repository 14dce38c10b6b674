"""Inputs for the format tests: awkward matrices with explicit zeros, formats with random parameters,
and the canonical CSR every conversion must reproduce."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st
from sparse_cases import csr_matrices

from sparsetir.formats import BSR, DBSR, ELL, SRBCRS, Hyb


@st.composite
def awkward_matrices(draw, max_dim: int = 24, max_row: int = 8):
    """``csr_matrices`` (0x0, empty rows, unsorted, duplicates, int64 indices) with some values set to zero."""
    matrix = draw(csr_matrices(max_dim=max_dim, max_row=max_row))
    if matrix.nnz:
        zeros = draw(st.lists(st.integers(0, matrix.nnz - 1), max_size=matrix.nnz))
        matrix.data[zeros] = 0.0
    return matrix


@st.composite
def hyb_formats(draw, max_parts: int = 5):
    buckets = draw(st.none() | st.lists(st.integers(1, 9), min_size=1, max_size=4, unique=True).map(sorted))
    return Hyb(draw(st.integers(1, max_parts)), buckets)


def any_format():
    """Every format, with small parameters so that padding, remainders and split rows all occur."""
    small = st.integers(1, 5)
    return st.one_of(
        st.builds(ELL, st.none() | small),
        st.builds(BSR, small),
        st.builds(DBSR, small),
        st.builds(SRBCRS, small, small),
        hyb_formats(),
    )


def canonical(A) -> sp.csr_matrix:
    """What every conversion must give back: sorted rows, duplicates summed, explicit zeros kept."""
    matrix = sp.csr_matrix(A, copy=True)
    matrix.sum_duplicates()
    return matrix


def assert_same_csr(actual: sp.csr_matrix, expected: sp.csr_matrix) -> None:
    """Same shape, same pattern (explicit zeros included), same values."""
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual.indptr, expected.indptr)
    np.testing.assert_array_equal(actual.indices, expected.indices)
    np.testing.assert_array_equal(actual.data, expected.data)
