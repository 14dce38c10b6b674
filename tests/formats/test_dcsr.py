"""DCSR, added through the format registry alone: its string parses, it round-trips, every op
written over CSR runs in it on the CPU and (emulated) CUDA, and the tuner offers it where rows
are empty."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from format_cases import awkward_matrices
from hypothesis import given, settings
from sparse_cases import random_dense, real_graph, tolerance

import sparsetir.formats as formats
from sparsetir.backend import scheduled_module
from sparsetir.backend.cuda import nvcc_available
from sparsetir.formats import parse_format, read_sparse_input, registered_formats
from sparsetir.formats.dcsr import DCSR, DCSRMatrix
from sparsetir.ops import compile_sddmm, compile_spmm, sddmm, spmm, spmm_function
from sparsetir.tune.space import format_choices


def hypersparse(m=120, n=90, seed=0) -> sp.csr_matrix:
    """Two thirds of the rows empty, explicit zeros kept, one long row."""
    A = sp.random(m, n, density=0.1, format="lil", dtype=np.float32, random_state=seed)
    A[np.arange(m) % 3 != 0] = 0
    A[3, :] = np.arange(n, dtype=np.float32) % 5  # a long row with explicit zeros
    return A.tocsr()


def test_the_registry_makes_dcsr_a_format_string_and_a_package_name():
    assert parse_format("dcsr") == DCSR() and parse_format(" DCSR ") == DCSR()
    assert formats.DCSR is DCSR and DCSR in registered_formats()
    with pytest.raises(ValueError, match="extra field"):
        parse_format("dcsr:4")


def test_conversion_keeps_only_the_non_empty_rows():
    A = hypersparse()
    D = DCSR().convert(A)
    assert isinstance(D, DCSRMatrix)
    np.testing.assert_array_equal(D.rows, np.flatnonzero(np.diff(A.indptr)))
    assert D.indptr.shape == (D.rows.shape[0] + 1,) and D.indptr[-1] == A.nnz
    assert (D.to_csr() != A).nnz == 0


@settings(max_examples=40, deadline=None)
@given(A=awkward_matrices())
def test_round_trip_on_awkward_matrices(A):
    canonical = read_sparse_input(A.astype(np.float64), canonical=True).to_csr()
    back = DCSR().convert(A, dtype="float64").to_csr()
    assert back.shape == canonical.shape
    np.testing.assert_array_equal(back.indptr, canonical.indptr)
    np.testing.assert_array_equal(back.indices, canonical.indices)
    np.testing.assert_array_equal(back.data, canonical.data)


@pytest.mark.parametrize("A", [hypersparse(), real_graph("cora"), sp.csr_matrix((7, 5), dtype=np.float32)],
                         ids=["hypersparse", "cora", "empty"])
def test_spmm_and_sddmm_in_dcsr_equal_scipy(A):
    A = A.astype(np.float32)
    B = random_dense(A.shape[1], 16, np.float32)
    np.testing.assert_allclose(spmm(A, B, format="dcsr"), A @ B, **tolerance(np.float32))
    X, Y = random_dense(A.shape[0], 8, np.float32), random_dense(A.shape[1], 8, np.float32)
    expected = sddmm(A, X, Y, format="csr")
    got = sddmm(A, X, Y, format="dcsr")
    np.testing.assert_allclose(got.data, expected.data, **tolerance(np.float32))


def test_values_can_change_without_recompiling():
    A = hypersparse(seed=3)
    kernel = compile_spmm(A, 8, format="dcsr")
    B = random_dense(A.shape[1], 8, np.float32)
    new = np.random.default_rng(1).standard_normal(A.nnz).astype(np.float32)
    np.testing.assert_allclose(kernel(B, values=new), sp.csr_matrix((new, A.indices, A.indptr), A.shape) @ B,
                               **tolerance(np.float32))
    assert compile_sddmm(A, 8, format="dcsr").matrix.nnz == A.nnz


def test_the_tuner_offers_dcsr_only_where_rows_are_empty():
    assert "dcsr" in format_choices(read_sparse_input(hypersparse(), canonical=True), "spmm")
    dense_rows = sp.random(50, 50, density=0.3, format="csr", dtype=np.float32, random_state=0)
    assert "dcsr" not in format_choices(read_sparse_input(dense_rows, canonical=True), "sddmm")


@pytest.mark.skipif(not nvcc_available()[0], reason="needs nvcc to build CUDA kernels")
def test_emulated_cuda_spmm_in_dcsr_equals_scipy():
    from sparsetir.testing.cuda_emulator import emulate_module

    A = hypersparse(61, 47, seed=5)
    B = random_dense(A.shape[1], 64, np.float32)
    kernel = compile_spmm(A, 64, format="dcsr", target="cuda")
    C = np.full((A.shape[0], 64), np.nan, np.float32)
    arrays = {name: np.array(a) for name, a in kernel._bound.items()}
    emulate_module(scheduled_module(spmm_function(DCSR(), 64, device="cuda"), "cuda"), kernel.source,
                   {**arrays, "B": B, "C": C}, sizes=kernel.sizes)
    np.testing.assert_allclose(C, A @ B, **tolerance(np.float32))
