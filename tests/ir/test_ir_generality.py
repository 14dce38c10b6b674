"""The IR is general: operators written with the public Stage I API alone equal scipy.

SpMV and the masked product live in tests/helpers/stage1_examples.py (public API only), shared
with the lowering and CUDA tests; the scatter reduction is written here.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import stage1_examples
from hypothesis import HealthCheck, given, settings
from sparse_cases import csr_matrices, real_graph, tolerance

import sparsetir
from sparsetir import ir


def spmv():
    return sparsetir.build(stage1_examples.spmv("float64"))


def masked_product():
    return sparsetir.build(stage1_examples.masked_product(dtype="float64"))


def column_sums():
    m, n, nnz = ir.size_vars("m n nnz")
    I = ir.dense_fixed("I", m)
    J = ir.sparse_variable("J", I, n, nnz)
    J_ = ir.dense_fixed("J_", n)
    A = ir.SparseBuffer("A", (I, J), "float64")
    s = ir.SparseBuffer("s", (J_,), "float64")

    @ir.sparse_iteration([I, J], "RS")
    def sums(i, j):
        s[j] += A[i, j]

    return sparsetir.build(ir.SparseFunction("colsum", [sums]))


def run_spmv(A):
    x = np.random.default_rng(0).uniform(size=A.shape[1])
    y = np.full(A.shape[0], np.nan)
    spmv()(A=A.data.astype(np.float64), x=x, y=y, J_indptr=A.indptr, J_indices=A.indices)
    np.testing.assert_allclose(y, A @ x, **tolerance(np.float64))


def run_masked_product(A, M):
    A, M = A.tocsr(), M.tocsr()
    A.sum_duplicates()
    M.sum_duplicates()  # the search needs sorted, duplicate-free rows
    C = np.full(A.nnz, np.nan)
    masked_product()(A=A.data.astype(np.float64), M=M.data.astype(np.float64), C=C,
                     JA_indptr=A.indptr, JA_indices=A.indices, JM_indptr=M.indptr, JM_indices=M.indices,
                     n=A.shape[1])
    want = A.multiply(M).tocsr()
    got = sp.csr_matrix((C, A.indices, A.indptr), shape=A.shape)
    difference = abs(got - want)
    assert difference.nnz == 0 or difference.max() < 1e-12


def test_spmv_equals_scipy_on_a_real_graph():
    run_spmv(real_graph("pubmed"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=csr_matrices())
def test_spmv_equals_scipy_on_awkward_matrices(A):
    run_spmv(A)


@pytest.mark.slow
def test_masked_product_with_a_different_pattern_on_a_real_graph():
    A = real_graph("ca-condmat")
    rng = np.random.default_rng(1)
    keep = rng.uniform(size=A.nnz) < 0.5  # M shares half of A's entries and adds its own
    shared = sp.csr_matrix((rng.uniform(size=A.nnz) * keep, A.indices, A.indptr), shape=A.shape)
    count = int(1e-4 * A.shape[0] * A.shape[1])  # about 53k entries of its own (sp.random draws them in O(m n): 90 s)
    extra = sp.csr_matrix((rng.uniform(size=count), (rng.integers(0, A.shape[0], count),
                                                     rng.integers(0, A.shape[1], count))), shape=A.shape)
    run_masked_product(A, shared + extra)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=csr_matrices(max_dim=16), M=csr_matrices(max_dim=16))
def test_masked_product_equals_scipy_on_awkward_matrices(A, M):
    M = sp.csr_matrix(M.toarray()[: A.shape[0], : A.shape[1]])
    M.resize(A.shape)
    run_masked_product(A, M)


def test_a_scatter_reduction_equals_scipy():
    A = real_graph("cora")
    s = np.full(A.shape[1], np.nan)
    column_sums()(A=A.data.astype(np.float64), s=s, J_indptr=A.indptr, J_indices=A.indices)
    np.testing.assert_allclose(s, np.asarray(A.sum(axis=0)).ravel(), **tolerance(np.float64))
