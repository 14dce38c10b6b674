"""Generated CUDA is checked on the CPU: the emulated CSR SpMM equals scipy, bad kernels are caught.

The kernels come from the project's IR: the CSR SpMM is ``spmm_function(CSR(), 64)`` scheduled by
the CUDA template (a warp per row, 2 features per lane; see ``tests/helpers/cuda_kernels.py``), and
the elementwise kernels are written with the Stage I API below.
None of this needs nvcc or a GPU: the CUDA C comes from TVM's code generator in this process.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from cuda_kernels import FEAT, SPMM_KERNEL, kernel_param_names, random_csr, spmm_kernel_args, spmm_module
from tvm import s_tir

from sparsetir import ir
from sparsetir.backend import scheduled_module
from sparsetir.backend.cuda import cuda_source
from sparsetir.lower import lower
from sparsetir.testing.cuda_emulator import (
    EmulationError,
    EmulationNotValid,
    emulate_kernel,
    emulate_module,
    launch_dims,
)


def elementwise_function(name: str, *, shift: bool) -> ir.SparseFunction:
    """Stage I ``B = A * 2`` over a vector of length n, then (with ``shift``) ``C = B + 1``."""
    n = ir.size_var("n")
    I = ir.dense_fixed("I", n)
    A = ir.SparseBuffer("A", (I,))
    B = ir.SparseBuffer("B", (I,))
    C = ir.SparseBuffer("C", (I,))

    @ir.sparse_iteration([I], "S", name="scale")
    def scale(i):
        B[i] = A[i] * 2.0

    @ir.sparse_iteration([I], "S", name="shift")
    def add_one(i):
        C[i] = B[i] + 1.0

    if shift:
        return ir.SparseFunction(name, [scale, add_one], params=[A, B, C])
    return ir.SparseFunction(name, [scale], params=[A, B])


@pytest.fixture(scope="module")
def spmm():
    mod = spmm_module()
    return mod, cuda_source(mod)


def test_emulated_spmm_equals_scipy_including_empty_rows(spmm):
    mod, source = spmm
    A = random_csr(m=203, n=150)  # 203 rows: the last block is partly outside the matrix
    B = np.random.default_rng(1).standard_normal((150, FEAT)).astype(np.float32)
    C = np.full((203, FEAT), np.nan, dtype=np.float32)
    sizes = emulate_module(mod, source, {"A": A.data, "B": B, "C": C, "J_indptr": A.indptr, "J_indices": A.indices})
    assert sizes == {"m": 203, "n": 150, "nnz": A.nnz}
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)
    assert not C[0].any() and not C[-1].any()


def test_emulate_kernel_with_launch_dims_equals_scipy_in_process(spmm):
    mod, source = spmm
    A = random_csr(m=64, n=40, seed=3)
    B = np.random.default_rng(4).standard_normal((40, FEAT)).astype(np.float32)
    C = np.zeros((64, FEAT), dtype=np.float32)
    grid, block = launch_dims(mod, sizes={"m": 64})[SPMM_KERNEL]
    emulate_kernel(source, SPMM_KERNEL, spmm_kernel_args(source, A, B, C), grid, block, isolate=False)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)


def test_launch_dims_are_read_from_the_host_launch(spmm):
    mod, _ = spmm
    assert launch_dims(mod, sizes={"m": 1001}) == {SPMM_KERNEL: ((251, 1, 1), (32, 4, 1))}
    assert launch_dims(mod, sizes={"m": 4}) == {SPMM_KERNEL: ((1, 1, 1), (32, 4, 1))}
    assert launch_dims(spmm_module(rows_per_block=8), sizes={"m": 17}) == {SPMM_KERNEL: ((3, 1, 1), (32, 8, 1))}
    with pytest.raises(KeyError, match="'m'"):
        launch_dims(mod, sizes={})


def test_every_kernel_of_a_module_runs_in_host_order():
    mod = scheduled_module(elementwise_function("scale_then_shift", shift=True), "cuda", threads=32)
    dims = launch_dims(mod, sizes={"n": 100})
    assert sorted(dims.values()) == [((4, 1, 1), (32, 1, 1))] * 2 and len(dims) == 2
    a = np.arange(100, dtype=np.float32)
    b, c = np.zeros_like(a), np.zeros_like(a)
    emulate_module(mod, cuda_source(mod), [a, b, c, 100])  # parameters A, B, C, n
    np.testing.assert_array_equal(c, a * 2 + 1)


def test_kernels_using_shared_memory_are_refused():
    # The project's template never stages through shared memory, so stage A by hand here.
    sch = s_tir.Schedule(tvm.IRModule({"scale": lower(elementwise_function("scale", shift=False))}))
    sch.work_on("scale")
    block = sch.get_sblock("scale0")
    (i,) = sch.get_loops(block)
    bx, tx = sch.split(i, [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    staged = sch.cache_read(block, 0, "shared")
    sch.compute_at(staged, bx)
    _, lane = sch.split(sch.get_loops(staged)[-1], [None, 64])
    sch.bind(lane, "threadIdx.x")
    source = cuda_source(sch.mod)
    assert "__shared__" in source
    a = np.ones(10, dtype=np.float32)
    assert kernel_param_names(source, "scale_kernel") == ["A_ptr", "B_ptr", "n"]
    with pytest.raises(EmulationNotValid, match="not valid.*__shared__"):
        emulate_kernel(source, "scale_kernel", [a, np.zeros_like(a), 10], (1,), (64,))


def run_spmm_with_c_stores_moved(source: str, offset: int, seed: int) -> None:
    """Emulate the SpMM with every store to C moved ``offset`` floats further along (8x8 matrix)."""
    moved = source.replace("*(float2*)(C_ptr + (", f"*(float2*)(C_ptr + {offset} + (")
    assert moved != source
    A = random_csr(m=8, n=8, seed=seed)
    B = np.ones((8, FEAT), dtype=np.float32)
    C = np.zeros((8, FEAT), dtype=np.float32)
    emulate_kernel(moved, SPMM_KERNEL, spmm_kernel_args(source, A, B, C), (2,), (32, 4))


def test_out_of_bounds_writes_are_detected(spmm):
    _, source = spmm
    with pytest.raises(EmulationError, match="wrote outside C_ptr.*past the end"):
        run_spmm_with_c_stores_moved(source, 64, seed=5)


def test_a_crashing_kernel_is_reported_not_fatal(spmm):
    _, source = spmm
    with pytest.raises(EmulationError, match="crashed"):
        run_spmm_with_c_stores_moved(source, 1000000000, seed=6)


def test_arguments_are_checked_against_the_kernel_signature(spmm):
    _, source = spmm
    A = random_csr(m=8, n=8)
    B = np.ones((8, FEAT), dtype=np.float32)
    C = np.zeros((8, FEAT), dtype=np.float32)
    with pytest.raises(TypeError, match="J_indptr_ptr.*int32.*int64"):
        wrong = spmm_kernel_args(source, A, B, C, J_indptr_ptr=A.indptr.astype(np.int64))
        emulate_kernel(source, SPMM_KERNEL, wrong, (2,), (32, 4))
    with pytest.raises(TypeError, match="takes 6 arguments"):
        emulate_kernel(source, SPMM_KERNEL, [A.data, B, C], (2,), (32, 4))
    with pytest.raises(ValueError, match="not defined"):
        emulate_kernel(source, "no_such_kernel", [], (1,), (1,))
