"""Every format converts from CSR and back without losing or inventing an entry: ``fmt.convert(A).to_csr() == A``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from format_cases import any_format, assert_same_csr, awkward_matrices, canonical
from hypothesis import given, settings
from sparse_cases import real_graph

from sparsetir.formats import BSR, CSR, DBSR, ELL, SRBCRS, Hyb

EVERY_FORMAT = [ELL(), ELL(2), BSR(4), DBSR(3), SRBCRS(4, 8), Hyb(), Hyb(8), Hyb(4, [1, 2, 4])]


@settings(max_examples=150, deadline=None)
@given(A=awkward_matrices(), fmt=any_format())
def test_round_trip_on_awkward_matrices(A, fmt):
    converted = fmt.convert(A, dtype="float64")
    assert converted.shape == A.shape
    assert converted.nnz == canonical(A).nnz
    assert_same_csr(converted.to_csr(), canonical(A))


@settings(max_examples=60, deadline=None)
@given(A=awkward_matrices(), fmt=any_format())
def test_scatter_to_csr_puts_every_slot_value_at_its_csr_entry(A, fmt):
    """Slot values computed from the slot's own (row, column) land on that entry of CSR."""
    converted = fmt.convert(A, dtype="float64")
    expected = canonical(A)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(expected.indptr))
    signature = {}
    for key, slots in converted.slot_arrays().items():
        shape = slots.csr_position.shape
        signature[key] = np.broadcast_to(slots.rows, shape) * 1000.0 + np.broadcast_to(slots.cols, shape)
    np.testing.assert_array_equal(converted.scatter_to_csr(signature), rows * 1000.0 + expected.indices)
    np.testing.assert_array_equal(converted.scatter_to_csr(list(signature.values())), rows * 1000.0 + expected.indices)


@pytest.mark.parametrize("fmt", EVERY_FORMAT, ids=repr)
@pytest.mark.parametrize("graph", ["cora", "pubmed"])
def test_round_trip_on_real_graphs(graph, fmt):
    A = real_graph(graph)
    assert_same_csr(fmt.convert(A, dtype="float64").to_csr(), canonical(A.astype(np.float64)))


@pytest.mark.parametrize("fmt", EVERY_FORMAT, ids=repr)
def test_values_are_cast_and_indices_take_the_index_dtype(fmt):
    A = sp.random(30, 20, density=0.3, format="csr", random_state=0, dtype=np.float64)
    converted = fmt.convert(A, dtype="float32", index_dtype="int64")
    for slots in converted.slot_arrays().values():
        assert slots.values.dtype == np.float32
        assert np.asarray(slots.cols).dtype == np.int64
    assert_same_csr(converted.to_csr(), canonical(A.astype(np.float32)))


@pytest.mark.parametrize("fmt", EVERY_FORMAT, ids=repr)
def test_duplicates_that_cancel_stay_as_explicit_zeros(fmt):
    """Duplicates are summed first; a sum of 0 is an explicit zero that must survive the round trip."""
    A = sp.csr_matrix((np.array([1.0, -1.0, 2.0, 0.0, 3.0]), np.array([4, 4, 0, 2, 1]), np.array([0, 3, 3, 5])),
                      shape=(3, 5))
    expected = canonical(A)
    assert 0.0 in expected.data
    assert_same_csr(fmt.convert(A, dtype="float64").to_csr(), expected)


@pytest.mark.parametrize("fmt", EVERY_FORMAT, ids=repr)
def test_csr_matrix_and_coo_inputs_convert_like_scipy_csr(fmt):
    A = sp.random(17, 11, density=0.4, format="coo", random_state=3)
    matrix = CSR().convert(A, dtype="float64", index_dtype="int32")
    assert_same_csr(fmt.convert(matrix, dtype="float64").to_csr(), canonical(A))
    assert_same_csr(fmt.convert(A, dtype="float64").to_csr(), canonical(A))


@pytest.mark.parametrize("fmt", EVERY_FORMAT, ids=repr)
def test_torch_sparse_input(fmt):
    torch = pytest.importorskip("torch")
    A = sp.random(9, 13, density=0.4, format="csr", random_state=5)
    tensor = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                     torch.from_numpy(A.indices.astype(np.int64)), torch.from_numpy(A.data),
                                     size=A.shape)
    assert_same_csr(fmt.convert(tensor, dtype="float64").to_csr(), canonical(A))


@pytest.mark.parametrize("fmt", EVERY_FORMAT, ids=repr)
def test_uncastable_values_raise_type_error(fmt):
    A = sp.csr_matrix(np.array([[1 + 2j, 0], [0, 3]]))
    with pytest.raises(TypeError, match="cannot be cast"):
        fmt.convert(A, dtype="float32")


def test_int32_indices_that_do_not_fit_are_refused():
    A = sp.csr_matrix((1, 2**31 + 5))
    with pytest.raises(ValueError, match="int64"):
        Hyb().convert(A, index_dtype="int32")
    assert Hyb().convert(A, index_dtype="int64").to_csr().shape == (1, 2**31 + 5)
