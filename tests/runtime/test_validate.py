"""Input validation in one place: each check refuses what a kernel cannot take, naming the field.

The first test goes through the public API (``sparsetir.build`` and a call by parameter name);
the rest pin each check of ``sparsetir.runtime.validate`` on the smallest input that breaks it.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import stage1_examples

import sparsetir
from sparsetir.runtime.validate import (
    check_coordinates,
    check_dense,
    check_disjoint_rows,
    check_distinct_rows,
    check_index_array,
    check_indices,
    check_indptr,
    check_permutation,
    check_sorted_rows,
    dtype_name,
    entry_rows,
    numpy_dtype,
)


@pytest.fixture(scope="module")
def masked_product():
    """C = A o M over A's pattern; M's axis JM is searched, so its rows must be sorted and unique."""
    return sparsetir.build(stage1_examples.masked_product(dtype="float64"))


def masked_product_inputs(M: sp.csr_matrix) -> dict:
    A = sp.csr_matrix(np.array([[1.0, 2.0, 0.0, 3.0], [0.0, 4.0, 5.0, 0.0]]))
    return {"A": A.data, "M": M.data, "C": np.full(A.nnz, np.nan), "JA_indptr": A.indptr, "JA_indices": A.indices,
            "JM_indptr": M.indptr, "JM_indices": M.indices, "n": A.shape[1]}


def test_a_duplicate_column_in_a_searched_row_is_refused(masked_product):
    """Row 1 of M lists column 2 twice: a binary search over it is undefined, so the call is refused."""
    indptr, indices = np.array([0, 2, 5]), np.array([0, 3, 1, 2, 2])
    M = sp.csr_matrix((np.ones(5), indices, indptr), shape=(2, 4))
    with pytest.raises(ValueError, match="JM_indices must be sorted without duplicates within each row"):
        masked_product(**masked_product_inputs(M))


def test_sorted_unique_rows_of_a_searched_axis_are_accepted(masked_product):
    M = sp.csr_matrix((np.array([2.0, 3.0, 5.0]), np.array([0, 1, 2]), np.array([0, 1, 3])), shape=(2, 4))
    inputs = masked_product_inputs(M)
    masked_product(**inputs)
    np.testing.assert_array_equal(inputs["C"], [2.0, 0.0, 0.0, 12.0, 25.0])


# ---------------------------------------------------------------- index arrays


def test_an_index_array_is_a_1d_integer_numpy_array():
    indices = np.array([0, 2], dtype=np.int32)
    assert check_index_array(indices, name="cols") is indices
    with pytest.raises(TypeError, match="cols must be a numpy array, got list"):
        check_index_array([0, 2], name="cols")
    with pytest.raises(ValueError, match=r"cols must be 1-D, got shape \(1, 2\)"):
        check_index_array(np.array([[0, 2]]), name="cols")
    with pytest.raises(TypeError, match="cols must have an integer dtype, got float64"):
        check_index_array(np.array([0.0, 2.0]), name="cols")


def test_indptr_has_rows_plus_one_entries():
    check_indptr(np.array([0, 1, 3]), name="rowptr", rows=2, nnz=3)
    with pytest.raises(ValueError, match=r"rowptr must have 4 entries \(rows \+ 1\), got 3"):
        check_indptr(np.array([0, 1, 3]), name="rowptr", rows=3, nnz=3)
    with pytest.raises(TypeError, match="rowptr must be a numpy array"):
        check_indptr([0, 1, 3], name="rowptr", rows=2)


def test_indptr_starts_at_zero():
    with pytest.raises(ValueError, match=r"rowptr\[0\] must be 0, got 2$"):
        check_indptr(np.array([2, 3, 3]), name="rowptr", rows=2, nnz=3)


def test_indptr_never_decreases_and_the_message_names_the_first_step_down():
    """Row 1 is empty (a step of 0 is fine); the first step down is from row 2 to row 3."""
    with pytest.raises(ValueError, match=r"rowptr must be non-decreasing: rowptr\[2\]=2 > rowptr\[3\]=1$"):
        check_indptr(np.array([0, 2, 2, 1, 3]), name="rowptr", rows=4, nnz=3)


def test_indptr_ends_at_nnz_when_nnz_is_given():
    with pytest.raises(ValueError, match=r"rowptr\[-1\]=3 does not match nnz=4 \(the length of the indices/values\)"):
        check_indptr(np.array([0, 1, 3]), name="rowptr", rows=2, nnz=4)
    check_indptr(np.array([0, 1, 3]), name="rowptr", rows=2)  # no nnz: no end to check
    check_indptr(np.array([0]), name="rowptr", rows=0, nnz=0)


def test_indices_lie_in_range_and_match_nnz():
    check_indices(np.array([0, 3, 3]), name="cols", length=4, nnz=3)
    check_indices(np.array([], dtype=np.int64), name="cols", length=0, nnz=0)
    with pytest.raises(TypeError, match="cols must be a numpy array"):
        check_indices([0, 3], name="cols", length=4)
    with pytest.raises(ValueError, match="cols has 3 entries but nnz is 4"):
        check_indices(np.array([0, 3, 3]), name="cols", length=4, nnz=4)
    with pytest.raises(ValueError, match="cols has a negative index -1"):
        check_indices(np.array([0, -1]), name="cols", length=4)
    with pytest.raises(ValueError, match="cols has index 4 out of range for length 4"):
        check_indices(np.array([0, 4]), name="cols", length=4)


# ---------------------------------------------------------------- row order and repeats


def csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.cumsum([0] + [len(row) for row in rows])
    return indptr, np.array([c for row in rows for c in row], dtype=np.int64)


@pytest.mark.parametrize("rows", [
    [[5, 6], [1, 2], [0, 3]],  # every row restarts lower than the last ended
    [[7], [1, 2], [0], [4, 5]],  # a one-entry first row
    [[], [0, 2, 3]],  # an empty first row
    [[2, 3], [0], []],  # an empty last row
    [],
])
def test_rows_sorted_within_themselves_are_accepted(rows):
    check_sorted_rows(*csr(rows), name="cols")


@pytest.mark.parametrize(("rows", "position"), [
    ([[1, 0]], 0),  # the smallest matrix with a disorder
    ([[0, 2], [1, 1]], 2),  # a repeat inside the last row
    ([[], [0, 2, 2]], 1),  # a repeat at the very end, after an empty first row
    ([[0], [3, 4, 2], [1]], 2),  # a step down inside a middle row
])
def test_a_row_out_of_order_or_with_a_repeat_is_refused_at_its_position(rows, position):
    with pytest.raises(ValueError, match=rf"cols must be sorted without duplicates within each row \(position {position}\)"):
        check_sorted_rows(*csr(rows), name="cols")


def test_a_coordinate_repeated_within_a_row_is_refused():
    check_distinct_rows(*csr([[3, 1], [1, 3]]), 4, name="cols")  # the same columns in two rows: fine
    check_distinct_rows(*csr([[1], [], [0]]), 2, name="cols")
    with pytest.raises(ValueError, match="cols repeats a coordinate within a row, but its axis promises distinct"):
        check_distinct_rows(*csr([[1, 1]]), 4, name="cols")


def test_a_coordinate_in_two_rows_is_refused():
    check_disjoint_rows(*csr([[2, 0], [1, 3], [4]]), name="cols")
    with pytest.raises(ValueError, match="cols lists coordinate 3 in two rows, but its axis promises disjoint rows"):
        check_disjoint_rows(*csr([[0, 3], [1], [3]]), name="cols")
    with pytest.raises(ValueError, match="cols lists coordinate 1 in two rows"):
        check_disjoint_rows(*csr([[1], [1]]), name="cols")
    with pytest.raises(ValueError, match="cols lists coordinate 5 in two rows"):
        check_disjoint_rows(*csr([[5], [0, 5]]), name="cols")  # the later row also holds the smallest coordinate


def test_entry_rows_names_the_row_of_every_entry():
    rows = entry_rows(np.array([0, 2, 2, 3], dtype=np.int32))
    np.testing.assert_array_equal(rows, [0, 0, 2])
    assert rows.dtype == np.int64


# ---------------------------------------------------------------- dense operands


def test_a_dense_operand_has_the_expected_shape_and_dtype():
    check_dense(np.zeros((3, 4), np.float32), name="B", shape=(3, 4), dtype="float32")
    with pytest.raises(ValueError, match=r"B must be 2-D with shape \(3, 4\), got shape \(3,\)"):
        check_dense(np.zeros(3, np.float32), name="B", shape=(3, 4), dtype="float32")
    with pytest.raises(ValueError, match=r"B has shape \(3, 5\), expected \(3, 4\)"):
        check_dense(np.zeros((3, 5), np.float32), name="B", shape=(3, 4), dtype="float32")
    with pytest.raises(TypeError, match="B has dtype float64, expected float32"):
        check_dense(np.zeros((3, 4)), name="B", shape=(3, 4), dtype="float32")


def test_a_shape_given_as_a_list_is_compared_as_a_tuple():
    check_dense(np.zeros((3, 4), np.float32), name="B", shape=[3, 4], dtype="float32")
    with pytest.raises(ValueError, match=r"B has shape \(4, 3\), expected \(3, 4\)"):
        check_dense(np.zeros((4, 3), np.float32), name="B", shape=[3, 4], dtype="float32")


def test_a_torch_operand_is_checked_by_its_numpy_dtype_name():
    torch = pytest.importorskip("torch")
    assert dtype_name(torch.zeros(2, dtype=torch.float32)) == "float32"
    assert dtype_name(np.zeros(2, np.int32)) == "int32"
    check_dense(torch.zeros((3, 4), dtype=torch.float32), name="B", shape=(3, 4), dtype="float32")
    with pytest.raises(TypeError, match="B has dtype float64, expected float32"):
        check_dense(torch.zeros((3, 4), dtype=torch.float64), name="B", shape=(3, 4), dtype="float32")
    with pytest.raises(ValueError, match=r"B has shape \(4, 3\), expected \(3, 4\)"):
        check_dense(torch.zeros((4, 3), dtype=torch.float32), name="B", shape=(3, 4), dtype="float32")


# ---------------------------------------------------------------- coordinate buffers and permutations


def test_coordinates_lie_in_their_axis_and_a_bad_one_is_named_by_its_flat_position():
    check_coordinates(np.array([[0, 4], [2, 3]]), name="OutIdx", length=5, axis="Nout")
    check_coordinates(np.zeros((0, 3), np.int32), name="OutIdx", length=0, axis="Nout")
    message = r"^OutIdx\[3\] = 5 is out of range: OutIdx indexes axis Nout, whose coordinates lie in \[0, 5\)$"
    with pytest.raises(ValueError, match=message):
        check_coordinates(np.array([[0, 4], [2, 5]]), name="OutIdx", length=5, axis="Nout")
    with pytest.raises(ValueError, match=r"^OutIdx\[1\] = -1 is out of range"):
        check_coordinates([0, -1, 9], name="OutIdx", length=5, axis="Nout")


def test_a_permutation_holds_each_position_once():
    check_permutation(np.array([2, 0, 1]), name="order")
    check_permutation([1, 0], name="order")
    check_permutation(np.array([], dtype=np.int64), name="order")
    with pytest.raises(ValueError, match=r"^order is not a permutation of 0\.\.2$"):
        check_permutation(np.array([0, 0, 2]), name="order")
    with pytest.raises(ValueError, match=r"^order is not a permutation of 0\.\.2$"):
        check_permutation(np.array([1, 2, 3]), name="order")
    with pytest.raises(TypeError, match="^order must have an integer dtype, got float64$"):
        check_permutation([0.0, 1.0], name="order")
    with pytest.raises(ValueError, match="^order must be 1-D"):
        check_permutation([[0, 1]], name="order")


def test_bfloat16_is_ml_dtypes_bfloat16(monkeypatch):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert numpy_dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    assert numpy_dtype("float32") == np.float32
    check_dense(np.zeros((2, 2), ml_dtypes.bfloat16), name="B", shape=(2, 2), dtype="bfloat16")
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    message = "bfloat16 numpy arrays need the ml_dtypes package (pip install ml_dtypes), or pass torch bfloat16 tensors"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        numpy_dtype("bfloat16")
