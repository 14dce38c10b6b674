"""CUDA kernels of every format: one launch for all sub-formats, atomics where writes collide,
and the emulated kernels equal scipy (atomicAdd is emulated sequentially)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from sparse_cases import random_dense, tolerance

from sparsetir.backend import scheduled_module
from sparsetir.backend.cuda import nvcc_available
from sparsetir.formats import parse_format
from sparsetir.ops import compile_sddmm, compile_spmm, sddmm_function, spmm_function
from sparsetir.testing.cuda_emulator import emulate_module

NVCC, WHY = nvcc_available()
pytestmark = pytest.mark.skipif(not NVCC, reason=f"needs nvcc to build CUDA kernels: {WHY}")


def matrix_with_a_long_row():
    A = sp.random(61, 47, density=0.12, format="csr", dtype=np.float32, random_state=5)
    return sp.vstack([A, sp.csr_matrix(np.ones((1, 47), np.float32))]).tocsr()


def kernels_in(source: str) -> list:
    """Kernel names, once each (the source declares every kernel before defining it)."""
    return list(dict.fromkeys(re.findall(r'extern "C" __global__ void __launch_bounds__\(\d+\) (\w+)\(', source)))


def emulate(kernel, func, inputs: dict, outputs: dict):
    arrays = {name: np.array(a) for name, a in kernel._bound.items()}
    emulate_module(scheduled_module(func, "cuda"), kernel.source, {**arrays, **inputs, **outputs},
                   sizes=kernel.sizes)


@pytest.mark.parametrize("fmt", ["ell", "ell:3", "bsr:4", "dbsr:4", "srbcrs:4:4", "hyb", "hyb:2:1,2,4", "rcsr:3"])
def test_emulated_cuda_spmm_in_every_format_equals_scipy(fmt):
    A = matrix_with_a_long_row()
    B = random_dense(A.shape[1], 64, np.float32)
    kernel = compile_spmm(A, 64, format=fmt, target="cuda")
    C = np.full((A.shape[0], 64), np.nan, np.float32)
    emulate(kernel, spmm_function(parse_format(fmt).resolve(A), 64, device="cuda"), {"B": B}, {"C": C})
    np.testing.assert_allclose(C, A @ B, **tolerance(np.float32))


def test_hyb_buckets_run_in_one_launch_with_a_guard_each():
    A = matrix_with_a_long_row()
    kernel = compile_spmm(A, 64, format="hyb:1:1,2,4", target="cuda")
    source = kernel.source
    names = kernels_in(source)
    assert len(names) == 2, f"a fill and one fused kernel for the three buckets, got {names}"
    fused = source.split(f"void __launch_bounds__(128) {names[1]}(", 2)[2]
    assert fused.count("rows_p0b0") >= 2, "guards compare the fused block index with each bucket's range"
    assert len(re.findall(r"tvm_builtin_cuda_atomic_add", fused)) == 1, "only the bucket with split rows is atomic"


def test_hyb_with_several_column_parts_writes_atomically():
    kernel = compile_spmm(matrix_with_a_long_row(), 64, format="hyb:2:1,2,4", target="cuda")
    assert kernel.source.count("tvm_builtin_cuda_atomic_add(") >= 6  # every bucket of both parts


@pytest.mark.parametrize("fmt", ["ell:3", "bsr:4", "hyb:2:1,2,4", "rcsr:3"])
def test_emulated_cuda_sddmm_in_every_format_equals_scipy(fmt):
    A = matrix_with_a_long_row()
    X, Y = random_dense(A.shape[0], 32, np.float32, 1), random_dense(A.shape[1], 32, np.float32, 2)
    kernel = compile_sddmm(A, 32, format=fmt, target="cuda")
    outputs = {name: np.full(kernel._shape[name], np.nan, np.float32) for name in kernel.spec["outputs"]}
    emulate(kernel, sddmm_function(parse_format(fmt).resolve(A), 32, device="cuda"), {"X": X, "Y": Y}, outputs)
    got = np.zeros(A.nnz, np.float32)
    kernel.layout.gather_outputs(outputs, got)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    np.testing.assert_allclose(got, A.data * np.einsum("ij,ij->i", X[rows], Y[A.indices]), **tolerance(np.float32))
