"""The arrays kernels index (ELL, BSR, DBSR, SR-BCRS) hold exactly what their layouts promise."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from format_cases import awkward_matrices, canonical
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsetir.formats import BSR, DBSR, ELL, SRBCRS


def dense_positions(A: sp.csr_matrix, shape=None) -> np.ndarray:
    """Dense matrix of CSR positions (-1 where A has no entry), padded to ``shape``."""
    out = np.full(shape or A.shape, -1, dtype=np.int64)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    out[rows, A.indices] = np.arange(A.nnz)
    return out


def dense_values(A: sp.csr_matrix, shape=None) -> np.ndarray:
    out = np.zeros(shape or A.shape)
    out[: A.shape[0], : A.shape[1]] = A.toarray()
    return out


@settings(max_examples=80, deadline=None)
@given(A=awkward_matrices(), width=st.none() | st.integers(1, 4))
def test_ell_rows_hold_their_first_entries_and_the_remainder_the_rest(A, width):
    expected = canonical(A)
    converted = ELL(width).convert(A, dtype="float64")
    degree = np.diff(expected.indptr)
    w = width if width is not None else max(int(degree.max(initial=0)), 1)
    assert converted.width == w and converted.indices.shape == (A.shape[0], w)
    for row in range(A.shape[0]):
        start, k = expected.indptr[row], min(degree[row], w)
        np.testing.assert_array_equal(converted.csr_position[row], list(range(start, start + k)) + [-1] * (w - k))
        np.testing.assert_array_equal(converted.indices[row], list(expected.indices[start:start + k]) + [0] * (w - k))
        np.testing.assert_array_equal(converted.values[row], list(expected.data[start:start + k]) + [0] * (w - k))
    remainder = converted.remainder
    np.testing.assert_array_equal(np.diff(remainder.indptr), np.maximum(degree - w, 0))
    np.testing.assert_array_equal(expected.indices[converted.remainder_position], remainder.indices)
    np.testing.assert_array_equal(expected.data[converted.remainder_position], remainder.values)
    if width is None:
        assert remainder.nnz == 0


def check_blocks(A, converted, block_rows):
    expected = canonical(A)
    b = converted.block
    mb, nb = -(-A.shape[0] // b), -(-A.shape[1] // b)
    assert converted.padded_shape == (mb * b, nb * b)
    positions = dense_positions(expected, converted.padded_shape)
    values = dense_values(expected, converted.padded_shape)
    blocks = positions.reshape(mb, b, nb, b).transpose(0, 2, 1, 3)
    nonempty = (blocks >= 0).any(axis=(2, 3))
    expected_rows, expected_cols = np.nonzero(nonempty)
    np.testing.assert_array_equal(block_rows, expected_rows)
    np.testing.assert_array_equal(converted.indices, expected_cols)
    np.testing.assert_array_equal(converted.csr_position, blocks[expected_rows, expected_cols])
    np.testing.assert_array_equal(converted.values,
                                  values.reshape(mb, b, nb, b).transpose(0, 2, 1, 3)[expected_rows, expected_cols])


@settings(max_examples=80, deadline=None)
@given(A=awkward_matrices(), block=st.integers(1, 6))
def test_bsr_blocks_match_the_padded_dense_matrix(A, block):
    converted = BSR(block).convert(A, dtype="float64")
    assert len(converted.indptr) == -(-A.shape[0] // block) + 1
    check_blocks(A, converted, np.repeat(np.arange(len(converted.indptr) - 1), np.diff(converted.indptr)))


@settings(max_examples=80, deadline=None)
@given(A=awkward_matrices(), block=st.integers(1, 6))
def test_dbsr_keeps_only_non_empty_block_rows(A, block):
    converted = DBSR(block).convert(A, dtype="float64")
    assert np.all(np.diff(converted.indptr) > 0)
    assert np.all(np.diff(converted.rows) > 0)
    check_blocks(A, converted, np.repeat(converted.rows, np.diff(converted.indptr)))


def test_bsr_pads_a_shape_the_block_does_not_divide():
    A = sp.csr_matrix(np.arange(1.0, 36.0).reshape(5, 7))
    converted = BSR(4).convert(A, dtype="float64")
    assert converted.shape == (5, 7) and converted.padded_shape == (8, 8)
    np.testing.assert_array_equal(converted.indptr, [0, 2, 4])
    np.testing.assert_array_equal(converted.values[3], [[33, 34, 35, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(converted.csr_position[3, 0], [32, 33, 34, -1])
    assert (converted.to_csr() != A).nnz == 0


def test_explicit_zeros_inside_blocks_are_mapped():
    A = sp.csr_matrix((np.array([0.0, 5.0, 0.0]), np.array([0, 3, 2]), np.array([0, 2, 2, 3])), shape=(3, 4))
    converted = BSR(2).convert(A, dtype="float64")
    np.testing.assert_array_equal(converted.csr_position[0], [[0, -1], [-1, -1]])
    np.testing.assert_array_equal(converted.csr_position[1], [[-1, 1], [-1, -1]])
    np.testing.assert_array_equal(converted.csr_position[2], [[2, -1], [-1, -1]])
    assert converted.to_csr().nnz == 3


def test_dbsr_skips_empty_block_rows():
    A = sp.csr_matrix(([1.0, 2.0], ([1, 9], [0, 5])), shape=(10, 6))
    converted = DBSR(2).convert(A)
    np.testing.assert_array_equal(converted.rows, [0, 4])
    np.testing.assert_array_equal(converted.indptr, [0, 1, 2])
    np.testing.assert_array_equal(converted.indices, [0, 2])


@settings(max_examples=80, deadline=None)
@given(A=awkward_matrices(), t=st.integers(1, 5), g=st.integers(1, 5))
def test_srbcrs_groups_hold_each_tiles_distinct_columns_with_a_mask(A, t, g):
    expected = canonical(A)
    converted = SRBCRS(t, g).convert(A, dtype="float64")
    m = A.shape[0]
    tiles = -(-m // t)
    assert converted.tiles == tiles and converted.group_indptr.shape == (tiles + 1,)
    positions = dense_positions(expected, (tiles * t, A.shape[1]))
    values = dense_values(expected, (tiles * t, A.shape[1]))
    for tile in range(tiles):
        used = np.flatnonzero((positions[tile * t:(tile + 1) * t] >= 0).any(axis=0))
        groups = slice(converted.group_indptr[tile], converted.group_indptr[tile + 1])
        assert groups.stop - groups.start == -(-used.size // g)
        columns = converted.indices[groups].reshape(-1)
        padding = columns.size - used.size
        np.testing.assert_array_equal(columns, list(used) + [0] * padding)
        in_tile = converted.csr_position[groups].reshape(-1, t)
        mask = converted.mask[groups].reshape(-1, t)
        np.testing.assert_array_equal(in_tile[: used.size], positions[tile * t:(tile + 1) * t, used].T)
        np.testing.assert_array_equal(converted.values[groups].reshape(-1, t)[: used.size],
                                      values[tile * t:(tile + 1) * t, used].T)
        assert not mask[used.size:].any() and np.all(converted.values[groups].reshape(-1, t)[used.size:] == 0)


def test_srbcrs_example():
    A = sp.csr_matrix(np.array([[1.0, 0, 2, 0, 0], [0, 0, 3, 0, 4], [5, 0, 0, 0, 0]]))
    converted = SRBCRS(2, 2).convert(A, dtype="float64")
    np.testing.assert_array_equal(converted.group_indptr, [0, 2, 3])
    np.testing.assert_array_equal(converted.indices, [[0, 2], [4, 0], [0, 0]])
    np.testing.assert_array_equal(converted.values[0], [[1, 0], [2, 3]])
    np.testing.assert_array_equal(converted.mask[1], [[False, True], [False, False]])
    np.testing.assert_array_equal(converted.values[2], [[5, 0], [0, 0]])
    np.testing.assert_array_equal(converted.mask[2], [[True, False], [False, False]])


def test_ell_resolves_its_width_to_the_max_degree():
    A = sp.csr_matrix(np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 4.0], [0.0, 0.0, 0.0]]))
    assert ELL().resolve(A) == ELL(3)
    assert ELL().resolve(sp.csr_matrix((2, 2))) == ELL(1)
    assert ELL(2).resolve(A).structure_key() == ("ell", 2)
