"""SpMM composed from the IR equals scipy: real graphs, hypothesis matrices, and every input path."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sparse_cases import REAL_GRAPHS, csr_matrices, random_dense, real_graph, tolerance

import sparsetir
from sparsetir.ops import compile_spmm, spmm


@pytest.mark.parametrize("name", REAL_GRAPHS)
def test_spmm_equals_scipy_on_real_graphs(name):
    A = real_graph(name)
    B = random_dense(A.shape[1], 32, np.float32)
    np.testing.assert_allclose(spmm(A, B), A.astype(np.float64) @ B, **tolerance(np.float32))


def test_spmm_int64_index_kernel_on_a_real_graph():
    A = real_graph("pubmed")
    B = random_dense(A.shape[1], 16, np.float64)
    kernel = compile_spmm(A, 16, dtype="float64", index_dtype="int64")
    assert kernel.spec["index_dtype"] == "int64"
    np.testing.assert_allclose(kernel(B), A @ B, **tolerance(np.float64))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=csr_matrices(), feat=st.sampled_from([1, 5, 16, 33]), dtype=st.sampled_from([np.float32, np.float64]))
def test_spmm_equals_scipy_on_awkward_matrices(A, feat, dtype):
    """Any shape including 0x0, empty rows, unsorted and duplicate indices, int32/int64 index arrays."""
    B = random_dense(A.shape[1], feat, dtype)
    C = spmm(A, B)
    assert C.dtype == dtype and C.shape == (A.shape[0], feat)
    np.testing.assert_allclose(C, A @ B.astype(np.float64), **tolerance(dtype))


@pytest.mark.parametrize("shape", [(0, 0), (0, 7), (7, 0), (1, 9), (9, 1)])
def test_spmm_degenerate_shapes(shape):
    A = sp.random(*shape, density=0.5, format="csr", random_state=1)
    B = random_dense(shape[1], 8, np.float32)
    np.testing.assert_allclose(spmm(A, B), A @ B, **tolerance(np.float32))


def test_spmm_huge_degree_row():
    rng = np.random.default_rng(0)
    A = sp.random(50, 20000, density=0.001, format="csr", random_state=2)
    A = sp.vstack([A, sp.csr_matrix(rng.uniform(size=(1, 20000)))]).tocsr()  # one row with 20000 entries
    B = random_dense(20000, 16, np.float64)
    np.testing.assert_allclose(spmm(A, B), A @ B, **tolerance(np.float64))


def test_float64_matrix_with_float32_operand_casts_values():
    A = sp.random(40, 30, density=0.2, format="csr", dtype=np.float64, random_state=3)
    B = random_dense(30, 8, np.float32)
    C = spmm(A, B)
    assert C.dtype == np.float32
    np.testing.assert_allclose(C, A @ B, **tolerance(np.float32))


def test_torch_inputs_give_torch_output():
    A = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=4)
    A_torch = torch.sparse_csr_tensor(
        torch.from_numpy(A.indptr.astype(np.int64)), torch.from_numpy(A.indices.astype(np.int64)),
        torch.from_numpy(A.data), size=A.shape)
    B = torch.from_numpy(random_dense(30, 8, np.float32))
    C = spmm(A_torch, B)
    assert isinstance(C, torch.Tensor) and C.dtype == torch.float32
    np.testing.assert_allclose(C.numpy(), A @ B.numpy(), **tolerance(np.float32))


def test_new_values_need_no_recompile():
    A = real_graph("cora")
    kernel = compile_spmm(A, 32)
    function = kernel.function
    B = random_dense(A.shape[1], 32, np.float32)
    values = np.random.default_rng(5).uniform(size=A.nnz).astype(np.float32)
    C = kernel(B, values=values)
    reference = sp.csr_matrix((values, A.indices, A.indptr), shape=A.shape) @ B
    np.testing.assert_allclose(C, reference, **tolerance(np.float32))
    assert compile_spmm(A, 32).function is function, "same structure, dtype and feat reuse the compiled kernel"
    other = sp.random(100, A.shape[1], density=0.01, format="csr", dtype=np.float32, random_state=6)
    assert compile_spmm(other, 32).function is function, "kernels are compiled for symbolic sizes"


def test_out_is_written_in_place_even_when_strided():
    A = sp.random(60, 50, density=0.1, format="csr", dtype=np.float32, random_state=7)
    B = random_dense(50, 16, np.float32)
    kernel = compile_spmm(A, 16)
    out = np.full((60, 16), np.nan, np.float32)
    assert kernel(B, out=out) is out
    np.testing.assert_allclose(out, A @ B, **tolerance(np.float32))
    wide = np.full((60, 32), np.nan, np.float32)
    strided = wide[:, ::2]
    kernel(B, out=strided)
    np.testing.assert_allclose(strided, A @ B, **tolerance(np.float32))
    assert np.isnan(wide[:, 1::2]).all(), "only the strided view is written"


def test_misaligned_non_contiguous_and_read_only_operands_are_safe():
    A = sp.random(60, 50, density=0.1, format="csr", dtype=np.float32, random_state=8)
    B = random_dense(50, 16, np.float32)
    kernel = compile_spmm(A, 16)
    raw = np.empty(B.size * 4 + 4, np.uint8)
    misaligned = raw[4:].view(np.float32).reshape(B.shape)
    misaligned[...] = B
    assert misaligned.ctypes.data % 16 != 0
    fortran = np.asfortranarray(B)
    read_only = B.copy()
    read_only.flags.writeable = False
    for operand in (misaligned, fortran, read_only):
        np.testing.assert_allclose(kernel(operand), A @ B, **tolerance(np.float32))


def test_kernel_source_is_host_llvm_ir():
    kernel = compile_spmm(sp.random(10, 10, density=0.3, format="csr", random_state=9), 16)
    assert "define" in kernel.source and "spmm" in kernel.source


def test_conversion_and_compile_are_timed_separately():
    kernel = compile_spmm(sp.random(10, 10, density=0.3, format="csr", random_state=10), 16)
    assert set(kernel.timings) == {"convert_s", "compile_s"}
    assert all(t >= 0 for t in kernel.timings.values())


def test_public_compile_spmm_is_exported_at_top_level():
    assert sparsetir.compile_spmm is compile_spmm
