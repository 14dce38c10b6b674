"""Buffers a function uses but leaves out of params are intermediates the kernel allocates: row
softmax with internal max and sum, and a whole GAT layer in one function, on the CPU and (emulated)
CUDA; reading an intermediate before anything wrote it is refused when the function is made."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from ir_programs import gat_layer, gat_reference, row_softmax, softmax_arrays
from sparse_cases import csr_matrices, random_dense, real_graph

from sparsetir import ir
from sparsetir.backend import build, scheduled_module
from sparsetir.backend.cuda import nvcc_available
from sparsetir.lower import lower_sparse_iter


def test_buffers_left_out_of_params_are_intermediates():
    func = row_softmax()
    assert [b.name for b in func.intermediates] == ["mx", "s"]
    assert [b.name for b in func.buffers] == ["E", "P"]
    assert "mx = alloc(float32[I])  # intermediate" in str(lower_sparse_iter(func))
    names = [p["name"] for p in build(func).signature.params]
    assert "mx" not in names and "s" not in names


def test_reading_an_intermediate_before_it_is_written_is_refused():
    m = ir.size_var("m")
    I = ir.dense_fixed("I", m)
    x, t, y = ir.SparseBuffer("x", (I,)), ir.SparseBuffer("t", (I,)), ir.SparseBuffer("y", (I,))

    @ir.sparse_iteration([I], "S")
    def use(i):
        y[i] = t[i] * 2.0

    @ir.sparse_iteration([I], "S")
    def make(i):
        t[i] = x[i] + 1.0

    with pytest.raises(ValueError, match="reads t, an intermediate"):
        ir.SparseFunction("f", [use, make], params=[x, y])
    ir.SparseFunction("f", [make, use], params=[x, y])  # written first: fine


def test_row_softmax_on_a_real_graph():
    A = real_graph("cora").astype(np.float32)
    A.data = random_dense(1, A.nnz, np.float32)[0] * 20
    args, sizes, reference = softmax_arrays(A)
    build(row_softmax())(**args, **sizes)
    np.testing.assert_allclose(args["P"], reference, rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(A=csr_matrices(sort=True, duplicates=False))
def test_row_softmax_on_awkward_matrices(A):
    args, sizes, reference = softmax_arrays(A)
    build(row_softmax())(**args, **sizes)
    np.testing.assert_allclose(args["P"], reference, rtol=1e-5, atol=1e-6)


def test_a_gat_layer_in_one_function():
    A = real_graph("citeseer").astype(np.float32)
    Q, Kt, V = (random_dense(A.shape[0], 16, np.float32, seed) for seed in (1, 2, 3))
    O = np.full((A.shape[0], 8), np.nan, np.float32)
    build(gat_layer(16, 8))(A=A.data, Q=Q, Kt=Kt, V=V[:, :8].copy(), O=O, J_indptr=A.indptr, J_indices=A.indices)
    np.testing.assert_allclose(O, gat_reference(A, Q, Kt, V[:, :8]), rtol=1e-4, atol=1e-5)


NVCC, WHY = nvcc_available()


@pytest.mark.skipif(not NVCC, reason=f"needs nvcc: {WHY}")
def test_softmax_and_gat_with_intermediates_on_emulated_cuda():
    from sparsetir.testing.cuda_emulator import emulate_module

    A = sp.random(40, 30, density=0.15, format="csr", dtype=np.float32, random_state=7)
    args, sizes, reference = softmax_arrays(A)
    emulate_module(scheduled_module(row_softmax(), "cuda"), build(row_softmax(), "cuda").source, args, sizes=sizes)
    np.testing.assert_allclose(args["P"], reference, rtol=1e-5, atol=1e-6)

    Q, Kt, V = (random_dense(s, 8, np.float32, seed) for s, seed in ((40, 1), (30, 2), (30, 3)))
    O = np.full((40, 4), np.nan, np.float32)
    func = gat_layer(8, 4)
    emulate_module(scheduled_module(func, "cuda"), build(func, "cuda").source,
                   {"A": A.data, "Q": Q, "Kt": Kt, "V": V[:, :4].copy(), "O": O, "J_indptr": A.indptr,
                    "J_indices": A.indices}, sizes={"m": 40, "n": 30, "nnz": A.nnz})
    np.testing.assert_allclose(O, gat_reference(A, Q, Kt, V[:, :4]), rtol=1e-4, atol=1e-5)
