"""Every (format, op) pair equals scipy, on real graphs and hypothesis matrices; knobs and races."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sparse_cases import csr_matrices, random_dense, real_graph, tolerance

from sparsetir.ops import compile_spmm, sddmm, spmm

SPMM_FORMATS = ["csr", "ell", "ell:3", "bsr:4", "bsr:3", "dbsr:4", "srbcrs:4:4", "hyb", "hyb:1:1,2,4",
                "hyb:4:1,2,4,8"]
SDDMM_FORMATS = ["csr", "ell", "ell:3", "bsr:4", "hyb", "hyb:3:1,2,4"]


def reference_sddmm(A, X, Y):
    A = A.tocsr(copy=True)
    A.sum_duplicates()
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    values = A.data * np.einsum("ij,ij->i", X[rows].astype(np.float64), Y[A.indices].astype(np.float64))
    return sp.csr_matrix((values, A.indices, A.indptr), shape=A.shape)


@pytest.mark.parametrize("fmt", SPMM_FORMATS)
@pytest.mark.parametrize("name", ["cora", "pubmed"])
def test_spmm_in_every_format_equals_scipy_on_real_graphs(fmt, name):
    A = real_graph(name)
    B = random_dense(A.shape[1], 32, np.float32)
    np.testing.assert_allclose(spmm(A, B, format=fmt), A.astype(np.float64) @ B, **tolerance(np.float32))


@pytest.mark.parametrize("fmt", SDDMM_FORMATS)
def test_sddmm_in_every_format_equals_scipy_on_a_real_graph(fmt):
    A = real_graph("citeseer")
    X, Y = random_dense(A.shape[0], 16, np.float32, 1), random_dense(A.shape[1], 16, np.float32, 2)
    got, want = sddmm(A, X, Y, format=fmt), reference_sddmm(A, X, Y)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.data, want.data, **tolerance(np.float32))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=csr_matrices(max_dim=20), fmt=st.sampled_from(SPMM_FORMATS), dtype=st.sampled_from([np.float32, np.float64]))
def test_spmm_in_every_format_equals_scipy_on_awkward_matrices(A, fmt, dtype):
    B = random_dense(A.shape[1], 8, dtype)
    np.testing.assert_allclose(spmm(A, B, format=fmt), A @ B.astype(np.float64), **tolerance(dtype))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=csr_matrices(max_dim=20), fmt=st.sampled_from(SDDMM_FORMATS))
def test_sddmm_in_every_format_equals_scipy_on_awkward_matrices(A, fmt):
    X, Y = random_dense(A.shape[0], 5, np.float64, 3), random_dense(A.shape[1], 5, np.float64, 4)
    got, want = sddmm(A, X, Y, format=fmt), reference_sddmm(A, X, Y)
    np.testing.assert_allclose(got.toarray(), want.toarray(), **tolerance(np.float64))


def test_new_values_reach_every_sub_format():
    A = real_graph("cora")
    kernel = compile_spmm(A, 16, format="hyb:2:1,2,4")
    values = np.random.default_rng(7).uniform(size=A.nnz).astype(np.float32)
    B = random_dense(A.shape[1], 16, np.float32)
    want = sp.csr_matrix((values, A.indices, A.indptr), shape=A.shape) @ B
    np.testing.assert_allclose(kernel(B, values=values), want, **tolerance(np.float32))


def test_hyb_buckets_share_one_parallel_region_on_the_cpu():
    A = real_graph("cora")
    B = random_dense(A.shape[1], 16, np.float32)
    fused = compile_spmm(A, 16, format="hyb:1:1,2,4,8", horizontal_fuse=True)
    assert "spmm_" in fused.source
    np.testing.assert_allclose(fused(B), A @ B, **tolerance(np.float32))


def test_fusing_sub_formats_that_share_rows_is_refused_on_the_cpu():
    A = real_graph("cora")
    with pytest.raises(ValueError, match="would race"):
        compile_spmm(A, 16, format="ell:2", horizontal_fuse=True)
    with pytest.raises(ValueError, match="would race"):
        compile_spmm(A, 16, format="hyb:2:1,2,4", horizontal_fuse=True)


def test_specialised_kernels_equal_scipy():
    A = real_graph("citeseer")
    B = random_dense(A.shape[1], 32, np.float32)
    for fmt in ("csr", "hyb", "bsr:8"):
        kernel = compile_spmm(A, 32, format=fmt, specialize=True)
        assert not [p for p in kernel.function.signature.params if p["role"] == "size"]
        np.testing.assert_allclose(kernel(B), A @ B, **tolerance(np.float32))


def graph_with_split_rows(seed: int = 0):
    """A few rows far longer than the largest bucket, so hyb splits each into many pieces."""
    rng = np.random.default_rng(seed)
    long_rows = sp.csr_matrix(rng.uniform(size=(8, 40000)).astype(np.float32))
    rest = sp.random(4000, 40000, density=2e-4, format="csr", dtype=np.float32, random_state=seed)
    return sp.vstack([long_rows, rest, long_rows]).tocsr()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["hyb:1:1,2,4,8", "hyb:4:1,2,4,8"])
def test_split_rows_never_race(fmt):
    """Repeated runs on long split rows (written by many pieces) give the same, right answer."""
    A = graph_with_split_rows()
    B = random_dense(A.shape[1], 16, np.float32)
    kernel = compile_spmm(A, 16, format=fmt)
    want = A.astype(np.float64) @ B
    out = np.empty((A.shape[0], 16), np.float32)
    for _ in range(25):
        np.testing.assert_allclose(kernel(B, out=out), want, rtol=1e-4, atol=1e-3)
