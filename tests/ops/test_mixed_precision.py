"""float16 and bfloat16 inputs (numpy float16, torch float16/bfloat16) run on the CPU and CUDA with
float32 accumulation: on rows of degree 20,000 the result stays within 1e-2 relative error, where
accumulating in the inputs' own precision would not."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sparse_cases import random_dense

from sparsetir import ir
from sparsetir.backend import build, scheduled_module
from sparsetir.backend.cuda import nvcc_available
from sparsetir.formats import parse_format
from sparsetir.ops import compile_spmm, sddmm, spmm, spmm_function
from sparsetir.transform import widen_accumulation

NVCC, WHY = nvcc_available()


def long_rows(rows: int = 5, degree: int = 20_000) -> sp.csr_matrix:
    """Rows of ``degree`` positive entries: a sum whose terms a half float cannot add one by one."""
    rng = np.random.default_rng(0)
    indptr = np.arange(rows + 1) * degree
    indices = np.tile(np.arange(degree), rows)
    return sp.csr_matrix((rng.uniform(0.5, 1.5, rows * degree).astype(np.float32), indices, indptr),
                         shape=(rows, degree))


def as_float64(array) -> np.ndarray:
    return (array.float().numpy() if isinstance(array, torch.Tensor) else array.astype(np.float32)).astype(np.float64)


def half_inputs(B: np.ndarray):
    return {"numpy float16": B.astype(np.float16), "torch float16": torch.from_numpy(B).half(),
            "torch bfloat16": torch.from_numpy(B).bfloat16()}


@pytest.mark.parametrize("kind", ["numpy float16", "torch float16", "torch bfloat16"])
@pytest.mark.parametrize("fmt", ["csr", "ell", "hyb"])
def test_half_spmm_on_long_rows_accumulates_in_float32(kind, fmt):
    A = long_rows()
    B = half_inputs(random_dense(A.shape[1], 8, np.float32) * 0.5 + 1.0)[kind]
    C = spmm(A, B, format=fmt)
    assert type(C) is type(B) and C.dtype == B.dtype
    reference = A.astype(np.float64) @ as_float64(B)
    assert np.abs(as_float64(C) - reference).max() / np.abs(reference).max() <= 1e-2


def test_half_accumulation_would_fail_the_same_check():
    """The check above is strong enough: float16 accumulation misses it by far."""
    m, n, nnz = ir.size_vars("m n nnz")
    I = ir.dense_fixed("I", m)
    J = ir.sparse_variable("J", I, n, nnz)
    A, y = ir.SparseBuffer("A", (I, J), "float16"), ir.SparseBuffer("y", (I,), "float16")
    x = ir.SparseBuffer("x", (ir.dense_fixed("J_", n),), "float16")

    @ir.sparse_iteration([I, J], "SR")
    def spmv(i, j):
        y[i] += A[i, j] * x[j]

    M = long_rows()
    xv = np.ones(M.shape[1], np.float16)
    yv = np.empty(M.shape[0], np.float16)
    build(ir.SparseFunction("spmv", [spmv], params=[A, x, y]))(A=M.data.astype(np.float16), x=xv, y=yv,
                                                                J_indptr=M.indptr, J_indices=M.indices)
    reference = M.astype(np.float64) @ np.ones(M.shape[1])
    assert np.abs(yv.astype(np.float64) - reference).max() / reference.max() > 0.1


@pytest.mark.parametrize("kind", ["numpy float16", "torch bfloat16"])
def test_half_sddmm_accumulates_in_float32(kind):
    A = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=2)
    X32, Y32 = random_dense(40, 4096, np.float32, 1) * 0.1 + 0.5, random_dense(30, 4096, np.float32, 2) * 0.1 + 0.5
    X, Y = half_inputs(X32)[kind], half_inputs(Y32)[kind]
    got = sddmm(A, X, Y)
    values = got.values() if isinstance(got, torch.Tensor) else got.data
    assert values.dtype == X.dtype
    reference = sddmm(A, as_float64(X), as_float64(Y)).data
    assert np.abs(as_float64(values) - reference).max() / np.abs(reference).max() <= 1e-2


def test_widen_accumulation_rewrites_the_reduction_and_casts_back_once():
    func = spmm_function(parse_format("csr"), 8, "float16", accum_dtype="float32")
    text = str(widen_accumulation(func))
    assert "C_acc[i, k] += T.Cast(\"float32\", A[i, j]) * T.Cast(\"float32\", B[j, k])" in text
    assert "C[i, k] = T.Cast(\"float16\", C_acc[i, k])" in text
    assert [b.name for b in widen_accumulation(func).intermediates] == ["C_acc"]
    single = spmm_function(parse_format("csr"), 8, "float32")
    assert widen_accumulation(single) is single  # nothing to widen


def test_float16_kernels_default_to_float32_accumulation():
    A = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
    assert compile_spmm(A, 8, dtype="float16").function is not compile_spmm(A, 8, dtype="float16",
                                                                            accum_dtype="float64").function


@pytest.mark.skipif(not NVCC, reason=f"needs nvcc: {WHY}")
@pytest.mark.parametrize(("dtype", "numpy_dtype"), [("float16", np.float16), ("bfloat16", "bfloat16")])
def test_half_spmm_on_emulated_cuda(dtype, numpy_dtype):
    import ml_dtypes

    from sparsetir.testing.cuda_emulator import emulate_module

    numpy_dtype = ml_dtypes.bfloat16 if numpy_dtype == "bfloat16" else numpy_dtype
    A = long_rows(rows=3, degree=4000)
    B = (random_dense(A.shape[1], 64, np.float32) * 0.5 + 1.0).astype(numpy_dtype)
    kernel = compile_spmm(A, 64, target="cuda", dtype=dtype)
    C = np.full((A.shape[0], 64), np.nan, numpy_dtype)
    bound = {name: np.array(a) for name, a in kernel._bound.items()}
    emulate_module(scheduled_module(spmm_function(parse_format("csr"), 64, dtype, accum_dtype="float32"), "cuda"),
                   kernel.source, {**bound, "B": B, "C": C}, sizes=kernel.sizes)
    reference = A.astype(np.float64) @ B.astype(np.float64)
    assert np.abs(C.astype(np.float64) - reference).max() / np.abs(reference).max() <= 1e-2
