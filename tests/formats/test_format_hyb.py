"""hyb(c, buckets) holds every non-zero exactly once, each (row, part) in the smallest bucket that fits it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from format_cases import awkward_matrices, canonical, hyb_formats
from hypothesis import given, settings
from sparse_cases import real_graph

from sparsetir.formats import Hyb
from sparsetir.formats.hyb import default_buckets


def degrees_per_part(A: sp.csr_matrix, col_parts: int) -> np.ndarray:
    """(m, c) degrees, counted the slow, obvious way."""
    m, n = A.shape
    part_width = -(-n // col_parts) if n else 1
    degrees = np.zeros((m, col_parts), dtype=np.int64)
    for row in range(m):
        for col in A.indices[A.indptr[row]:A.indptr[row + 1]]:
            degrees[row, col // part_width] += 1
    return degrees


def check_hyb_invariants(A, fmt: Hyb) -> None:
    expected = canonical(A)
    converted = fmt.convert(A, dtype="float64")
    m, n = A.shape
    buckets = fmt.resolve(A).buckets
    assert converted.buckets == buckets and converted.col_parts == fmt.col_parts
    assert len(converted.parts) == fmt.col_parts and all(len(part) == len(buckets) for part in converted.parts)
    degrees = degrees_per_part(expected, fmt.col_parts)
    part_width = converted.part_width
    seen = []
    for p, part in enumerate(converted.parts):
        placed = np.zeros(m, dtype=np.int64)
        for b, bucket in enumerate(part):
            width = buckets[b]
            R = bucket.rows.shape[0]
            assert bucket.width == width
            assert bucket.indices.shape == bucket.values.shape == bucket.csr_position.shape == (R, width)
            # rows ascending; the pieces of one row consecutive; the grouped view agrees
            assert np.all(np.diff(bucket.rows) >= 0)
            np.testing.assert_array_equal(np.repeat(bucket.unique_rows, np.diff(bucket.piece_indptr)), bucket.rows)
            assert np.all(np.diff(bucket.unique_rows) > 0) and bucket.piece_indptr[0] == 0
            # padding: mask 0, column 0, value 0; stored slots first in every ELL row, in column order
            mask = bucket.csr_position >= 0
            assert np.all(bucket.indices[~mask] == 0) and np.all(bucket.values[~mask] == 0)
            assert np.all(mask[:, :-1] >= mask[:, 1:])
            # columns of a bucket row lie in this part's column range
            cols = bucket.indices[mask]
            assert np.all((cols >= p * part_width) & (cols < min((p + 1) * part_width, n)))
            # each slot is the CSR entry it claims to be
            positions = bucket.csr_position[mask]
            np.testing.assert_array_equal(expected.indices[positions], cols)
            np.testing.assert_array_equal(expected.data[positions], bucket.values[mask])
            np.testing.assert_array_equal(np.searchsorted(expected.indptr, positions, side="right") - 1,
                                          np.broadcast_to(bucket.rows[:, None], mask.shape)[mask])
            seen.append(positions)
            # the smallest fitting bucket; only rows above the largest width are split
            stored = np.bincount(bucket.rows, weights=mask.sum(axis=1), minlength=m).astype(np.int64)
            d = degrees[bucket.unique_rows, p]
            np.testing.assert_array_equal(stored[bucket.unique_rows], d)
            assert np.all(d <= width) or b == len(buckets) - 1
            assert np.all(d > (buckets[b - 1] if b else 0))
            np.testing.assert_array_equal(np.diff(bucket.piece_indptr), np.maximum(-(-d // width), 1))
            placed[bucket.unique_rows] += 1
        # a (row, part) with entries is in exactly one bucket; an empty one in none
        np.testing.assert_array_equal(placed, (degrees[:, p] > 0).astype(np.int64))
    # every non-zero exactly once
    everything = np.concatenate(seen) if seen else np.zeros(0, dtype=np.int64)
    np.testing.assert_array_equal(np.sort(everything), np.arange(expected.nnz))


@settings(max_examples=120, deadline=None)
@given(A=awkward_matrices(max_dim=30, max_row=20), fmt=hyb_formats(max_parts=6))
def test_hyb_invariants_on_awkward_matrices(A, fmt):
    check_hyb_invariants(A, fmt)


@pytest.mark.parametrize("fmt", [Hyb(1, [1, 2, 4]), Hyb(16, [1, 2, 4, 8, 16, 32]), Hyb(8), Hyb(3, [2, 5])], ids=repr)
def test_hyb_invariants_on_pubmed(fmt):
    check_hyb_invariants(real_graph("pubmed"), fmt)


def test_long_rows_split_into_consecutive_pieces_of_the_largest_bucket():
    A = sp.csr_matrix(np.array([[1.0] * 9 + [0.0] * 3, [0.0] * 12, [2.0] * 12, [0.0, 3.0] + [0.0] * 10]))
    bucket = Hyb(1, [2, 4]).convert(A).parts[0][1]
    np.testing.assert_array_equal(bucket.rows, [0, 0, 0, 2, 2, 2])
    np.testing.assert_array_equal(bucket.unique_rows, [0, 2])
    np.testing.assert_array_equal(bucket.piece_indptr, [0, 3, 6])
    np.testing.assert_array_equal(bucket.csr_position[2], [8, -1, -1, -1])
    assert bucket.has_split_rows
    small = Hyb(1, [2, 4]).convert(A).parts[0][0]
    np.testing.assert_array_equal(small.rows, [3])
    assert not small.has_split_rows


def test_empty_buckets_and_empty_matrices_have_zero_rows():
    for A in (sp.csr_matrix((0, 0)), sp.csr_matrix((5, 0)), sp.csr_matrix((0, 7)), sp.csr_matrix((4, 6))):
        converted = Hyb(3, [1, 8]).convert(A)
        for part in converted.parts:
            for bucket in part:
                assert bucket.rows.shape == (0,) and bucket.indices.shape == (0, bucket.width)
                np.testing.assert_array_equal(bucket.piece_indptr, [0])
        assert converted.to_csr().shape == A.shape


def test_more_column_parts_than_columns():
    A = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))
    converted = Hyb(8, [1, 2]).convert(A)
    assert converted.part_width == 1
    assert [sum(b.rows.shape[0] for b in part) for part in converted.parts] == [1, 1, 1, 0, 0, 0, 0, 0]


@pytest.mark.parametrize(("max_degree", "expected"), [(0, (1,)), (1, (1,)), (3, (1, 2, 4)), (4, (1, 2, 4)),
                                                      (5, (1, 2, 4, 8)), (512, tuple(2**i for i in range(10))),
                                                      (10_000, tuple(2**i for i in range(10)))])
def test_default_buckets_are_powers_of_two_up_to_the_max_degree_capped_at_512(max_degree, expected):
    assert default_buckets(max_degree) == expected


def test_default_buckets_follow_the_largest_degree_within_a_part():
    A = sp.csr_matrix(np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 0.0]]))
    assert Hyb(1).resolve(A) == Hyb(1, [1, 2, 4, 8])
    assert Hyb(2).resolve(A) == Hyb(2, [1, 2, 4])
    assert Hyb(2).convert(A).buckets == (1, 2, 4)
    assert Hyb(2, [3]).resolve(A) == Hyb(2, [3])


def test_structure_key_needs_explicit_buckets():
    with pytest.raises(ValueError, match="buckets depend"):
        Hyb(8).structure_key()
    assert Hyb(8, [1, 2, 4]).structure_key() == ("hyb", 8, (1, 2, 4))
    A = sp.csr_matrix(np.ones((3, 6)))
    assert Hyb(2).resolve(A).structure_key() == ("hyb", 2, (1, 2, 4))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_bucket_arrays_are_contiguous_and_16_byte_aligned(dtype):
    """Kernels take them zero-copy only when they are (runtime.marshal)."""
    A = sp.random(200, 150, density=0.05, format="csr", random_state=2)
    for part in Hyb(3, [1, 3, 5]).convert(A, dtype=dtype).parts:
        for bucket in part:
            for array in (bucket.rows, bucket.indices, bucket.values, bucket.csr_position, bucket.unique_rows,
                          bucket.piece_indptr):
                assert array.flags.c_contiguous and array.ctypes.data % 16 == 0
