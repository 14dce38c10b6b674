"""CUDA kernels built from the IR: real device code without a GPU, checked by emulation against scipy.

The emulator compiles the generated CUDA C with g++ and runs every block and thread in
turn; it is valid for kernels without shared memory, barriers or warp intrinsics, which
holds for every kernel here (it refuses the others).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import stage1_examples
from sparse_cases import random_dense, real_graph, tolerance
from stage1_examples import masked_product

import sparsetir
from sparsetir.backend import scheduled_module
from sparsetir.backend.cuda import nvcc_available
from sparsetir.backend.fatbin import fatbin_entries
from sparsetir.formats import CSR
from sparsetir.ops import compile_sddmm, compile_spmm, sddmm_function, spmm_function
from sparsetir.runtime import cuda_available
from sparsetir.testing.cuda_emulator import emulate_module

NVCC, WHY = nvcc_available()
pytestmark = pytest.mark.skipif(not NVCC, reason=f"needs nvcc to build CUDA kernels: {WHY}")


def matrix_with_empty_rows():
    A = sp.random(203, 150, density=0.05, format="csr", dtype=np.float32, random_state=11)
    A = A.tolil()
    A[0, :] = 0
    A[101, :] = 0
    A[202, :] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    return A


def test_cuda_spmm_embeds_sass_for_sm90_and_sm80():
    kernel = compile_spmm(matrix_with_empty_rows(), 64, target="cuda")
    entries = {(e.kind, e.arch) for e in fatbin_entries(kernel.function.library)}
    assert {("ELF", "sm_90"), ("ELF", "sm_80"), ("PTX", "sm_90")} <= entries
    assert '__global__' in kernel.source and "threadIdx.x" in kernel.source


def test_cuda_float16_spmm_compiles():
    kernel = compile_spmm(matrix_with_empty_rows(), 64, target="cuda", dtype="float16")
    assert "half" in kernel.source
    assert ("ELF", "sm_90") in {(e.kind, e.arch) for e in fatbin_entries(kernel.function.library)}


@pytest.mark.skipif(cuda_available()[0], reason="this machine has a GPU")
def test_calling_a_cuda_kernel_without_a_gpu_is_a_clear_runtime_error():
    A = matrix_with_empty_rows()
    kernel = compile_spmm(A, 64, target="cuda")
    with pytest.raises(RuntimeError, match="cannot run a CUDA kernel here"):
        kernel(random_dense(A.shape[1], 64, np.float32))


@pytest.mark.parametrize("feat", [64, 8, 96])
def test_emulated_cuda_spmm_equals_scipy(feat):
    A = matrix_with_empty_rows()
    kernel = compile_spmm(A, feat, target="cuda")
    B = random_dense(A.shape[1], feat, np.float32)
    C = np.full((A.shape[0], feat), np.nan, np.float32)
    mod = scheduled_module(spmm_function(CSR(), feat), "cuda")
    emulate_module(mod, kernel.source, {"A": A.data, "B": B, "C": C, "J_indptr": A.indptr, "J_indices": A.indices})
    np.testing.assert_allclose(C, A @ B, **tolerance(np.float32))


def test_emulated_cuda_spmm_on_a_real_graph():
    A = real_graph("cora")
    kernel = compile_spmm(A, 32, target="cuda")
    B = random_dense(A.shape[1], 32, np.float32)
    C = np.full((A.shape[0], 32), np.nan, np.float32)
    mod = scheduled_module(spmm_function(CSR(), 32), "cuda")
    emulate_module(mod, kernel.source, {"A": A.data, "B": B, "C": C, "J_indptr": A.indptr, "J_indices": A.indices})
    np.testing.assert_allclose(C, A @ B, **tolerance(np.float32))


def test_emulated_cuda_sddmm_equals_scipy():
    A = matrix_with_empty_rows()
    kernel = compile_sddmm(A, 16, target="cuda")
    X = random_dense(A.shape[0], 16, np.float32, seed=1)
    Y = random_dense(A.shape[1], 16, np.float32, seed=2)
    C = np.full(A.nnz, np.nan, np.float32)
    mod = scheduled_module(sddmm_function(CSR(), 16), "cuda")
    emulate_module(mod, kernel.source,
                   {"A": A.data, "X": X, "Y": Y, "C": C, "J_indptr": A.indptr, "J_indices": A.indices})
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    np.testing.assert_allclose(C, A.data * np.einsum("ij,ij->i", X[rows], Y[A.indices]), **tolerance(np.float32))


def test_emulated_cuda_masked_product_with_binary_search_equals_scipy():
    func = masked_product()
    compiled = sparsetir.build(func, "cuda")
    A = matrix_with_empty_rows()
    M = (A.multiply(sp.random(*A.shape, density=0.5, random_state=3) > 0)
         + sp.random(*A.shape, density=0.02, random_state=4)).tocsr().astype(np.float32)
    M.sum_duplicates()
    C = np.full(A.nnz, np.nan, np.float32)
    emulate_module(scheduled_module(func, "cuda"), compiled.source,
                   {"A": A.data, "M": M.data, "C": C, "JA_indptr": A.indptr, "JA_indices": A.indices,
                    "JM_indptr": M.indptr, "JM_indices": M.indices, "m": A.shape[0], "n": A.shape[1]})
    got = sp.csr_matrix((C, A.indices, A.indptr), shape=A.shape)
    np.testing.assert_allclose(got.toarray(), A.multiply(M).toarray(), **tolerance(np.float32))


def test_emulated_cuda_spmv_written_with_the_public_ir_equals_scipy():
    func = stage1_examples.spmv()
    compiled = sparsetir.build(func, "cuda")
    A = matrix_with_empty_rows()
    xv = random_dense(A.shape[1], 1, np.float32).ravel()
    yv = np.full(A.shape[0], np.nan, np.float32)
    emulate_module(scheduled_module(func, "cuda"), compiled.source,
                   {"A": A.data, "x": xv, "y": yv, "J_indptr": A.indptr, "J_indices": A.indices})
    np.testing.assert_allclose(yv, A @ xv, **tolerance(np.float32))
