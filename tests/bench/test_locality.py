"""local_columns keeps a matrix's shape, degrees and values and makes its columns consecutive."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsetir.bench.locality import local_columns


def check_local(A: sp.csr_matrix) -> sp.csr_matrix:
    L = local_columns(A)
    m, n = A.shape
    assert L.shape == A.shape and L.nnz == A.nnz
    np.testing.assert_array_equal(L.indptr, A.indptr)
    np.testing.assert_array_equal(L.data, A.data)
    for i in range(m):
        cols = L.indices[L.indptr[i]:L.indptr[i + 1]]
        expected = np.sort((i + np.arange(len(cols))) % n) if n else cols
        np.testing.assert_array_equal(cols, expected)
    assert L.has_canonical_format
    return L


@settings(max_examples=40, deadline=None)
@given(m=st.integers(0, 12), n=st.integers(1, 12), density=st.floats(0, 1), seed=st.integers(0, 2**16))
def test_random_matrices_keep_shape_degrees_and_values(m, n, density, seed):
    check_local(sp.random(m, n, density=density, format="csr", random_state=seed, dtype=np.float32))


def test_wrap_around_rows_are_sorted_and_full_rows_stay_full():
    A = sp.csr_matrix(np.array([[0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 1]], dtype=np.float32))
    L = check_local(A)
    np.testing.assert_array_equal(L[3].indices, [0, 1, 3])  # columns 3, 4, 5 mod 4
    np.testing.assert_array_equal(L[1].indices, [0, 1, 2, 3])


def test_int64_indices_and_empty_matrix():
    A = sp.csr_matrix(sp.random(30, 7, density=0.3, format="csr", random_state=1))
    A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    check_local(A)
    check_local(sp.csr_matrix((0, 5), dtype=np.float32))


def test_a_row_longer_than_the_columns_is_refused():
    A = sp.csr_matrix((np.ones(3), np.array([0, 0, 1]), np.array([0, 3])), shape=(1, 2))
    with pytest.raises(ValueError, match="3 non-zeros but the matrix has only 2 columns"):
        local_columns(A)
