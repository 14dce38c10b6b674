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


# ---------------------------------------------------------------- knobs: sparse_fuse, reduce_lanes

KNOB_CASES = [{"sparse_fuse": True}, {"sparse_fuse": False}, {"reduce_lanes": 1}, {"reduce_lanes": 2},
              {"reduce_lanes": 4}, {"reduce_lanes": 8}, {"reduce_lanes": 16},
              {"sparse_fuse": True, "reduce_lanes": 4}, {"sparse_fuse": False, "reduce_lanes": 16, "unroll": 0}]


@pytest.mark.parametrize("knobs", KNOB_CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
@pytest.mark.parametrize("name", ["cora", "pubmed"])
def test_sddmm_knobs_equal_scipy_on_real_graphs(name, knobs):
    A = real_graph(name)
    X = random_dense(A.shape[0], 32, np.float32, seed=1)
    Y = random_dense(A.shape[1], 32, np.float32, seed=2)
    assert_same_pattern_and_values(sddmm(A, X, Y, **knobs), reference_sddmm(A, X, Y), np.float32)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=csr_matrices(), feat=st.sampled_from([1, 4, 12, 16]), dtype=st.sampled_from([np.float32, np.float64]),
       knobs=st.sampled_from(KNOB_CASES))
def test_sddmm_knobs_equal_scipy_on_awkward_matrices(A, feat, dtype, knobs):
    """Empty rows, 0x0, int64 indices, and lanes that do not divide feat (the scalar reduction)."""
    X = random_dense(A.shape[0], feat, dtype, seed=3)
    Y = random_dense(A.shape[1], feat, dtype, seed=4)
    assert_same_pattern_and_values(sddmm(A, X, Y, **knobs), reference_sddmm(A, X, Y), dtype)


@pytest.mark.parametrize("fmt", ["ell", "ell:3", "bsr:4", "hyb", "hyb:3:1,2,4"])
@pytest.mark.parametrize("lanes", [1, 4, 16])
def test_sddmm_reduce_lanes_equal_scipy_in_every_format(fmt, lanes):
    A = real_graph("citeseer")
    X = random_dense(A.shape[0], 32, np.float32, seed=1)
    Y = random_dense(A.shape[1], 32, np.float32, seed=2)
    assert_same_pattern_and_values(sddmm(A, X, Y, format=fmt, reduce_lanes=lanes), reference_sddmm(A, X, Y),
                                   np.float32)


def test_sddmm_hyb_fused_horizontally_with_vector_reduction_equals_scipy():
    A = real_graph("cora")
    X = random_dense(A.shape[0], 32, np.float64, seed=1)
    Y = random_dense(A.shape[1], 32, np.float64, seed=2)
    got = sddmm(A, X, Y, format="hyb", horizontal_fuse=True, reduce_lanes=4)
    assert_same_pattern_and_values(got, reference_sddmm(A, X, Y), np.float64)


def test_sddmm_int64_index_kernel_with_vector_reduction():
    A = real_graph("cora")
    kernel = compile_sddmm(A, 32, dtype="float64", index_dtype="int64", reduce_lanes=4)
    assert kernel.spec["index_dtype"] == "int64"
    X = random_dense(A.shape[0], 32, np.float64, seed=1)
    Y = random_dense(A.shape[1], 32, np.float64, seed=2)
    np.testing.assert_allclose(kernel(X, Y), reference_sddmm(A, X, Y).data, **tolerance(np.float64))


@pytest.mark.parametrize("knobs", [{"reduce_lanes": 0}, {"reduce_lanes": -4}, {"reduce_lanes": 2.5},
                                   {"reduce_lanes": True}, {"reduce_lanes": "8"}, {"sparse_fuse": "yes"},
                                   {"sparse_fuse": 1}, {"sparse_fuse": True, "format": "ell"},
                                   {"sparse_fuse": True, "format": "hyb"}])
def test_sddmm_bad_knob_values_raise_value_error(knobs):
    A = sp.random(8, 8, density=0.3, format="csr", dtype=np.float32, random_state=0)
    X, Y = random_dense(8, 8, np.float32), random_dense(8, 8, np.float32)
    with pytest.raises(ValueError, match="sparse_fuse|reduce_lanes"):
        sddmm(A, X, Y, **knobs)


def test_cpu_sddmm_runs_rows_in_parallel_with_a_vector_reduction():
    """The CPU default: no binary search, rows parallel, the k reduction in vector partial sums."""
    from sparsetir.backend import scheduled_module
    from sparsetir.formats import CSR
    from sparsetir.ops.sddmm import sddmm_function

    A = real_graph("cora")
    assert "row0_state" not in compile_sddmm(A, 32).source  # the fused loop's row search state
    assert "row0_state" in compile_sddmm(A, 32, sparse_fuse=True).source
    script = scheduled_module(sddmm_function(CSR(), 32, sparse_fuse=False), "llvm").script()
    assert "while" not in script and "T.parallel(m)" in script
    assert "C_rf = T.sblock_alloc_buffer((8," in script and "T.vectorized(8)" in script
    fused = scheduled_module(sddmm_function(CSR(), 32, sparse_fuse=True), "llvm").script()
    assert "while" in fused and "T.parallel(nnz)" in fused
    scalar = scheduled_module(sddmm_function(CSR(), 32, sparse_fuse=False), "llvm", reduce_lanes=1).script()
    assert "C_rf" not in scalar
