"""Row reordering formats (rcm, degree): the rows are a permutation of the non-empty ones, the
matrix round-trips, SpMM and SDDMM equal scipy on awkward and real matrices, values= keep CSR
order, and the tuner offers rcm on the CPU only."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from format_cases import awkward_matrices
from hypothesis import given, settings
from sparse_cases import random_dense, real_graph, tolerance

from sparsetir.formats import parse_format, read_sparse_input
from sparsetir.formats.reorder import RCM, DegreeOrder, ReorderedMatrix, rcm_order
from sparsetir.ops import compile_spmm, sddmm, spmm
from sparsetir.tune.space import format_choices


def banded_then_shuffled(n=200, seed=0) -> tuple[sp.csr_matrix, np.ndarray]:
    band = sp.diags([1, 1, 1], [-1, 0, 1], shape=(n, n), format="csr", dtype=np.float32)
    perm = np.random.default_rng(seed).permutation(n)
    return band[perm][:, perm].tocsr(), perm


def test_rcm_recovers_a_small_bandwidth():
    A, _ = banded_then_shuffled()
    order = rcm_order(read_sparse_input(A, canonical=True))
    assert sorted(order.tolist()) == list(range(A.shape[0]))
    B = A[order][:, order].tocoo()
    assert np.abs(B.row - B.col).max() <= 2 < np.abs(A.tocoo().row - A.tocoo().col).max()


@pytest.mark.parametrize("fmt", ["rcm", "degree"])
def test_rows_are_the_non_empty_ones_in_a_new_order(fmt):
    A, _ = banded_then_shuffled()
    A = A.tolil()
    A[5, :] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    matrix = parse_format(fmt).convert(A)
    assert isinstance(matrix, ReorderedMatrix)
    assert sorted(matrix.rows.tolist()) == np.flatnonzero(np.diff(A.indptr)).tolist()
    assert sorted(matrix.csr_position.tolist()) == list(range(A.nnz))
    assert (matrix.to_csr() != A).nnz == 0
    if fmt == "degree":
        degrees = np.diff(A.indptr)[matrix.rows]
        assert (np.diff(degrees) <= 0).all()


@settings(max_examples=40, deadline=None)
@given(A=awkward_matrices())
def test_round_trip_on_awkward_matrices(A):
    canonical = read_sparse_input(A.astype(np.float64), canonical=True).to_csr()
    for fmt in (RCM(), DegreeOrder()):
        back = fmt.convert(A, dtype="float64").to_csr()
        np.testing.assert_array_equal(back.indptr, canonical.indptr)
        np.testing.assert_array_equal(back.indices, canonical.indices)
        np.testing.assert_array_equal(back.data, canonical.data)


@settings(max_examples=15, deadline=None)
@given(A=awkward_matrices())
def test_spmm_in_rcm_equals_scipy_on_awkward_matrices(A):
    A = A.astype(np.float32)
    B = random_dense(A.shape[1], 8, np.float32)
    np.testing.assert_allclose(spmm(A, B, format="rcm"), read_sparse_input(A, canonical=True).to_csr() @ B,
                               **tolerance(np.float32))


@pytest.mark.parametrize("fmt", ["rcm", "degree"])
def test_real_graph_spmm_sddmm_and_values(fmt):
    A = real_graph("cora").astype(np.float32)
    B = random_dense(A.shape[1], 16, np.float32)
    np.testing.assert_allclose(spmm(A, B, format=fmt), A @ B, **tolerance(np.float32))
    X, Y = random_dense(A.shape[0], 8, np.float32), random_dense(A.shape[1], 8, np.float32)
    np.testing.assert_allclose(sddmm(A, X, Y, format=fmt).data, sddmm(A, X, Y, format="csr").data,
                               **tolerance(np.float32))
    kernel = compile_spmm(A, 16, format=fmt)
    values = np.random.default_rng(1).standard_normal(A.nnz).astype(np.float32)
    reweighted = sp.csr_matrix((values, A.indices, A.indptr), shape=A.shape)
    np.testing.assert_allclose(kernel(B, values=values), reweighted @ B, **tolerance(np.float32))


def test_rectangular_falls_back_to_first_column_order():
    A = sp.random(60, 90, density=0.05, format="csr", dtype=np.float32, random_state=3)
    order = rcm_order(read_sparse_input(A, canonical=True))
    first = [A.indices[A.indptr[r]] if A.indptr[r + 1] > A.indptr[r] else 90 for r in order]
    assert first == sorted(first)
    B = random_dense(90, 4, np.float32)
    np.testing.assert_allclose(spmm(A, B, format="rcm"), A @ B, **tolerance(np.float32))


def test_the_tuner_offers_rcm_on_the_cpu_only():
    A = read_sparse_input(sp.random(100, 100, density=0.05, format="csr", random_state=0), canonical=True)
    assert "rcm" in format_choices(A, "spmm", "cpu") and "rcm" not in format_choices(A, "spmm", "cuda")
    assert "degree" not in format_choices(A, "spmm", "cpu")
