"""sparse_reorder and sparse_fuse rewrite Stage I; illegal orders and fusions get clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sparse_cases import random_dense, tolerance
from stage1_examples import csr_spmm

import sparsetir
from sparsetir import ir
from sparsetir.lower import lower_sparse_iter
from sparsetir.transform import sparse_fuse, sparse_reorder


def run_spmm(func, A, feat):
    kernel = sparsetir.build(func)
    B = random_dense(A.shape[1], feat, np.float32)
    C = np.full((A.shape[0], feat), np.nan, np.float32)
    kernel(A=A.data.astype(np.float32), B=B, C=C, J_indptr=A.indptr, J_indices=A.indices)
    return C, A @ B


def test_reorder_changes_loop_order_and_kinds():
    func, (I, J, K) = csr_spmm(16)
    reordered = sparse_reorder(func, [I, K, J])
    assert "sparse_iteration([I, K, J], 'SSR'" in str(reordered)
    assert "for i, k in grid(m, 16):" in str(lower_sparse_iter(reordered))


def test_reordered_spmm_still_equals_scipy():
    func, (I, J, K) = csr_spmm(16)
    A = sp.random(70, 50, density=0.1, format="csr", dtype=np.float32, random_state=0)
    C, want = run_spmm(sparse_reorder(func, [I, K, J]), A, 16)
    np.testing.assert_allclose(C, want, **tolerance(np.float32))


def test_reorder_refuses_a_child_before_its_parent():
    func, (I, J, K) = csr_spmm()
    with pytest.raises(ValueError, match="J would come before its parent I"):
        sparse_reorder(func, [J, I, K])
    with pytest.raises(ValueError, match="exactly once"):
        sparse_reorder(func, [I, J])


def test_fuse_refuses_non_contiguous_axes_and_mixed_kinds():
    func, (I, J, K) = csr_spmm()
    with pytest.raises(ValueError, match="contiguous"):
        sparse_fuse(func, [I, K])
    with pytest.raises(ValueError, match="mix 'S' and 'R'"):
        sparse_fuse(func, [I, J])


def test_fusing_dense_axes_gives_one_loop():
    m = ir.size_var("m")
    I = ir.dense_fixed("I", m)
    K = ir.dense_fixed("K", 6)
    X = ir.SparseBuffer("X", (I, K))
    Y = ir.SparseBuffer("Y", (I, K))

    @ir.sparse_iteration([I, K], "SS")
    def double(i, k):
        Y[i, k] = X[i, k] * 2.0

    fused = sparse_fuse(ir.SparseFunction("double", [double]), [I, K])
    assert "for ik in grid(m * 6):" in str(lower_sparse_iter(fused))
    x = random_dense(13, 6, np.float32)
    y = np.zeros_like(x)
    sparsetir.build(fused)(X=x, Y=y)
    np.testing.assert_allclose(y, 2 * x)
