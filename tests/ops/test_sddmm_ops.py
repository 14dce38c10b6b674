"""SDDMM composed from the IR (rows and columns fused: one loop over the non-zeros) equals scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sparse_cases import REAL_GRAPHS, csr_matrices, random_dense, real_graph, tolerance

from sparsetir.ops import compile_sddmm, sddmm


def reference_sddmm(A, X, Y):
    """``A.data * (X[i] . Y[j])`` on A's canonical pattern, in float64."""
    A = A.tocsr(copy=True)
    A.sum_duplicates()
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    dots = np.einsum("ij,ij->i", X[rows].astype(np.float64), Y[A.indices].astype(np.float64))
    return sp.csr_matrix((A.data * dots, A.indices, A.indptr), shape=A.shape)


def assert_same_pattern_and_values(got, want, dtype):
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.data, want.data, **tolerance(dtype))


@pytest.mark.parametrize("name", REAL_GRAPHS)
def test_sddmm_equals_scipy_on_real_graphs(name):
    A = real_graph(name)
    X = random_dense(A.shape[0], 32, np.float32, seed=1)
    Y = random_dense(A.shape[1], 32, np.float32, seed=2)
    assert_same_pattern_and_values(sddmm(A, X, Y), reference_sddmm(A, X, Y), np.float32)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=csr_matrices(), feat=st.sampled_from([1, 7, 32]), dtype=st.sampled_from([np.float32, np.float64]))
def test_sddmm_equals_scipy_on_awkward_matrices(A, feat, dtype):
    """0x0, empty rows, unsorted indices; duplicates are summed first."""
    X = random_dense(A.shape[0], feat, dtype, seed=3)
    Y = random_dense(A.shape[1], feat, dtype, seed=4)
    assert_same_pattern_and_values(sddmm(A, X, Y), reference_sddmm(A, X, Y), dtype)


def test_sddmm_keeps_explicit_zeros():
    A = sp.csr_matrix((np.array([0.0, 2.0, 0.0]), np.array([0, 2, 1]), np.array([0, 2, 2, 3])), shape=(3, 3))
    X = random_dense(3, 4, np.float64)
    Y = random_dense(3, 4, np.float64)
    result = sddmm(A, X, Y)
    assert result.nnz == 3
    assert_same_pattern_and_values(result, reference_sddmm(A, X, Y), np.float64)


def test_sddmm_with_torch_returns_torch_sparse_csr():
    A = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=5)
    A_torch = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                      torch.from_numpy(A.indices.astype(np.int64)),
                                      torch.from_numpy(A.data), size=A.shape)
    X = torch.from_numpy(random_dense(30, 8, np.float32))
    Y = torch.from_numpy(random_dense(20, 8, np.float32))
    result = sddmm(A_torch, X, Y)
    assert result.layout == torch.sparse_csr
    want = reference_sddmm(A, X.numpy(), Y.numpy())
    np.testing.assert_allclose(result.values().numpy(), want.data, **tolerance(np.float32))


def test_sddmm_kernel_takes_new_values():
    A = real_graph("cora")
    kernel = compile_sddmm(A, 16)
    X = random_dense(A.shape[0], 16, np.float32)
    Y = random_dense(A.shape[1], 16, np.float32)
    values = np.random.default_rng(6).uniform(size=A.nnz).astype(np.float32)
    out = kernel(X, Y, values=values)
    want = reference_sddmm(sp.csr_matrix((values, A.indices, A.indptr), shape=A.shape), X, Y)
    np.testing.assert_allclose(out, want.data, **tolerance(np.float32))
