"""spmm(A, B, transpose_a=True) computes A^T @ B without the caller transposing: a stable host
transpose (duplicates kept) timed as conversion, in every format, with values= in A's own order,
also after export and load."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from sparse_cases import csr_matrices, random_dense, real_graph, tolerance

import sparsetir.runtime as runtime
from sparsetir.formats import read_sparse_input
from sparsetir.formats.matrix import transpose
from sparsetir.ops import compile_spmm, spmm


def with_duplicates(m=37, n=23) -> sp.csr_matrix:
    """A rectangular matrix whose row 0 stores one column twice (not canonical)."""
    A = sp.random(m, n, density=0.2, format="csr", dtype=np.float32, random_state=0)
    data = np.r_[A.data[:1], np.float32(1.5), A.data[1:]].astype(np.float32)
    indices = np.r_[A.indices[:1], A.indices[:1], A.indices[1:]]
    return sp.csr_matrix((data, indices, np.r_[0, A.indptr[1:] + 1]), shape=A.shape)


@settings(max_examples=40, deadline=None)
@given(A=csr_matrices())
def test_the_host_transpose_is_stable_and_keeps_duplicates(A):
    matrix = read_sparse_input(A)
    At, order = transpose(matrix)
    assert At.shape == (A.shape[1], A.shape[0]) and At.nnz == A.nnz
    np.testing.assert_array_equal(At.to_csr().toarray(), A.T.toarray())
    np.testing.assert_array_equal(At.values, np.asarray(matrix.values)[order])
    for column in range(A.shape[1]):  # each column's entries keep A's order (stable)
        assert list(order[At.indptr[column]:At.indptr[column + 1]]) == list(np.flatnonzero(A.indices == column))


@pytest.mark.parametrize("fmt", ["csr", "ell", "hyb", "bsr:4", "rcsr:3", "dcsr"])
def test_transpose_a_equals_scipy_on_a_rectangular_matrix_with_duplicates(fmt):
    A = with_duplicates()
    assert not A.has_canonical_format
    B = random_dense(A.shape[0], 8, np.float32)
    np.testing.assert_allclose(spmm(A, B, transpose_a=True, format=fmt), A.T @ B, **tolerance(np.float32))


def test_transpose_a_on_a_real_graph_with_torch_inputs():
    A = real_graph("cora").astype(np.float32)
    A = A[:, : A.shape[1] - 100]  # rectangular
    B = torch.from_numpy(random_dense(A.shape[0], 16, np.float32))
    C = spmm(A, B, transpose_a=True)
    assert isinstance(C, torch.Tensor) and C.shape == (A.shape[1], 16)
    np.testing.assert_allclose(C.numpy(), A.T @ B.numpy(), **tolerance(np.float32))


def test_values_stay_in_the_order_of_A_also_after_export(tmp_path):
    A = with_duplicates()
    B = random_dense(A.shape[0], 8, np.float32)
    kernel = compile_spmm(A, 8, transpose_a=True)
    assert kernel.timings["convert_s"] > 0 and kernel.spec["transpose_a"]
    values = random_dense(1, A.nnz, np.float32, 3)[0]
    expected = sp.csr_matrix((values, A.indices, A.indptr), shape=A.shape).T @ B
    np.testing.assert_allclose(kernel(B, values=values), expected, **tolerance(np.float32))
    np.testing.assert_allclose(kernel(torch.from_numpy(B), values=torch.from_numpy(values)).numpy(), expected,
                               **tolerance(np.float32))
    loaded = runtime.load(kernel.export(tmp_path / "spmm_t.so"))
    np.testing.assert_allclose(loaded(B, values=values), expected, **tolerance(np.float32))


def test_operand_rows_are_checked_against_A_rows():
    A = with_duplicates()
    with pytest.raises(ValueError, match="A\\^T @ B needs B with A's rows"):
        spmm(A, np.ones((A.shape[1], 4), np.float32), transpose_a=True)
    with pytest.raises(TypeError, match="transpose_a must be True or False"):
        compile_spmm(A, 4, transpose_a="yes")
