"""Stage I IR: axes, buffers and iterations check their structure and print readably."""

from __future__ import annotations

import pytest
import stage1_examples

from sparsetir import ir as sp


@pytest.fixture
def csr_spmm():
    func, (I, J, K) = stage1_examples.csr_spmm()
    A, B, C = func.buffers
    return func, (I, J, K, B.axes[0]), (A, B, C)


def test_stage1_prints_axes_buffers_and_body(csr_spmm):
    func, *_ = csr_spmm
    assert str(func) == "\n".join([
        "# Stage I: sparse function spmm (index dtype int32)",
        "I = dense_fixed(m)",
        "J = sparse_variable(I, length=n, nnz=nnz)  # J_indptr[m + 1], J_indices[nnz]",
        "K = dense_fixed(64)",
        "J_ = dense_fixed(n)",
        "A = sparse_buffer((I, J), 'float32')",
        "B = sparse_buffer((J_, K), 'float32')",
        "C = sparse_buffer((I, K), 'float32')",
        "with sparse_iteration([I, J, K], 'SRS', name='spmm') as (i, j, k):",
        "    C[i, k] += A[i, j] * B[j, k]",
    ])


def test_four_axis_kinds_and_their_metadata():
    m, nnz = sp.size_vars("m nnz")
    I = sp.dense_fixed("I", m)
    ragged = sp.dense_variable("R", I, 16, nnz)
    ell = sp.sparse_fixed("E", I, 100, 4)
    csr = sp.sparse_variable("S", I, 100, nnz)
    assert (ragged.indptr is not None, ragged.indices is None) == (True, True)
    assert (ell.indptr is None, ell.indices is not None) == (True, True)
    assert [b.name for b in csr.metadata()] == ["S_indptr", "S_indices"]
    assert str(ell.chain_size()) == "m * 4"
    assert [a.name for a in csr.chain()] == ["I", "S"]


def test_buffers_share_one_axis_tree(csr_spmm):
    func, (I, J, K, J_), (A, B, C) = csr_spmm
    D = sp.SparseBuffer("D", (I, J))
    assert D.axes[1].indptr is A.axes[1].indptr
    assert [m.name for m in func.metadata()] == ["J_indptr", "J_indices"]


def test_int64_axes_make_int64_metadata():
    m, n, nnz = sp.size_vars("m n nnz", "int64")
    I = sp.dense_fixed("I", m, idtype="int64")
    J = sp.sparse_variable("J", I, n, nnz)
    assert J.idtype == "int64" and J.indices.dtype == "int64"


@pytest.mark.parametrize("make, error", [
    (lambda: sp.dense_fixed("I", -1), ValueError),
    (lambda: sp.dense_fixed("I", "m"), TypeError),
    (lambda: sp.dense_fixed("I", 4, idtype="int16"), TypeError),
    (lambda: sp.sparse_variable("J", "I", 4, 4), TypeError),
    (lambda: sp.dense_fixed("I", sp.size_var("m", "int64")), TypeError),
])
def test_bad_axes_are_refused(make, error):
    with pytest.raises(error):
        make()


def test_buffer_axes_must_follow_their_parent():
    I = sp.dense_fixed("I", 4)
    J = sp.sparse_variable("J", I, 4, 8)
    with pytest.raises(ValueError, match="directly after its parent"):
        sp.SparseBuffer("A", (J, I))
    with pytest.raises(ValueError, match="appears twice"):
        sp.SparseBuffer("A", (I, I))
    with pytest.raises(IndexError, match="has 2 axes"):
        sp.SparseBuffer("A", (I, J))[0]


def test_iteration_checks_kinds_order_and_stores():
    I = sp.dense_fixed("I", 4)
    J = sp.sparse_variable("J", I, 4, 8)
    A = sp.SparseBuffer("A", (I, J))
    C = sp.SparseBuffer("C", (I,))
    with pytest.raises(ValueError, match="kinds"):
        @sp.sparse_iteration([I, J], "S")
        def short(i, j):
            C[i] += A[i, j]
    with pytest.raises(ValueError, match="before its parent"):
        @sp.sparse_iteration([J, I], "RS")
        def backwards(j, i):
            C[i] += A[i, j]
    with pytest.raises(ValueError, match="use '\\+='"):
        @sp.sparse_iteration([I, J], "SR")
        def assigns(i, j):
            C[i] = A[i, j]
    D = sp.SparseBuffer("D", (I, J), "float64")
    with pytest.raises(TypeError, match="storing a float64 value into A"):
        @sp.sparse_iteration([I, J], "SS")
        def narrowing(i, j):
            A[i, j] = D[i, j]
    with pytest.raises(RuntimeError, match="only valid inside"):
        C[0] = 1.0


def test_distinct_sizes_with_one_name_are_refused():
    I = sp.dense_fixed("I", sp.size_var("m"))
    K = sp.dense_fixed("K", sp.size_var("m"))
    C = sp.SparseBuffer("C", (I, K))

    @sp.sparse_iteration([I, K], "SS")
    def fill(i, k):
        C[i, k] = 1.0

    with pytest.raises(ValueError, match="share the names"):
        sp.SparseFunction("fill", [fill])
