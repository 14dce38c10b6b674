"""Generated CUDA is checked on the CPU: the emulated CSR SpMM equals scipy, bad kernels are caught.

The kernel is the CSR SpMM of shared/TVM.md section 2 (a warp per row, 2 features per lane).
None of this needs nvcc or a GPU: the CUDA C comes from TVM's code generator in this process.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import tvm
from tvm import s_tir
from tvm.script import tirx as T

from sparsetir.backend.cuda import cuda_source
from sparsetir.testing.cuda_emulator import (
    EmulationError,
    EmulationNotValid,
    emulate_kernel,
    emulate_module,
    launch_dims,
)

FEAT = 64


@T.prim_func(s_tir=True)
def csr_spmm(a: T.handle, b: T.handle, c: T.handle, indptr: T.handle, indices: T.handle):
    T.func_attr({"global_symbol": "csr_spmm", "tirx.noalias": True})
    m = T.int32()
    n = T.int32()
    nnz = T.int32()
    A = T.match_buffer(a, (nnz,), "float32")
    B = T.match_buffer(b, (n, FEAT), "float32")
    C = T.match_buffer(c, (m, FEAT), "float32")
    IP = T.match_buffer(indptr, (m + 1,), "int32")
    IX = T.match_buffer(indices, (nnz,), "int32")
    for i in range(m):
        with T.sblock("row"):
            vi = T.axis.spatial(m, i)
            T.reads(IP[vi : vi + 2], A[0:nnz], IX[0:nnz], B[0:n, 0:FEAT])
            T.writes(C[vi, 0:FEAT])
            for j, k in T.grid(IP[vi + 1] - IP[vi], FEAT):
                with T.sblock("update"):
                    vj = T.axis.reduce(IP[vi + 1] - IP[vi], j)
                    vk = T.axis.spatial(FEAT, k)
                    with T.init():
                        C[vi, vk] = T.float32(0)
                    C[vi, vk] = C[vi, vk] + A[IP[vi] + vj] * B[IX[IP[vi] + vj], vk]


@T.prim_func(s_tir=True)
def scale_then_shift(a: T.handle, b: T.handle, c: T.handle):
    T.func_attr({"global_symbol": "scale_then_shift", "tirx.noalias": True})
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    C = T.match_buffer(c, (n,), "float32")
    for i in range(n):
        with T.sblock("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(n):
        with T.sblock("C"):
            vi = T.axis.spatial(n, i)
            C[vi] = B[vi] + T.float32(1)


def spmm_schedule(rows_per_block: int = 4) -> tvm.IRModule:
    sch = s_tir.Schedule(tvm.IRModule({"csr_spmm": csr_spmm}))
    sch.work_on("csr_spmm")
    (i,) = sch.get_loops(sch.get_sblock("row"))
    update = sch.get_sblock("update")
    j, k = sch.get_loops(update)
    io, ii = sch.split(i, [None, rows_per_block])
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    lane, vec = sch.split(k, [32, None])
    sch.reorder(lane, j, vec)
    sch.bind(lane, "threadIdx.x")
    sch.vectorize(vec)
    local = sch.cache_write(update, 0, "local")
    sch.reverse_compute_at(local, lane)
    sch.vectorize(sch.get_loops(local)[-1])
    sch.decompose_reduction(update, j)
    return sch.mod


@pytest.fixture(scope="module")
def spmm():
    mod = spmm_schedule()
    return mod, cuda_source(mod)


def random_csr(m: int, n: int, seed: int = 0) -> sp.csr_matrix:
    """Random CSR with empty rows at the start, the end and in between."""
    rng = np.random.default_rng(seed)
    degrees = rng.integers(0, min(12, n + 1), size=m)
    degrees[[0, 1, m // 2, m - 1]] = 0
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int32)
    indices = np.concatenate([np.sort(rng.choice(n, d, replace=False)) for d in degrees]).astype(np.int32)
    data = rng.standard_normal(indptr[-1]).astype(np.float32)
    return sp.csr_matrix((data, indices, indptr), shape=(m, n))


def test_emulated_spmm_equals_scipy_including_empty_rows(spmm):
    mod, source = spmm
    A = random_csr(m=203, n=150)  # 203 rows: the last block is partly outside the matrix
    B = np.random.default_rng(1).standard_normal((150, FEAT)).astype(np.float32)
    C = np.full((203, FEAT), np.nan, dtype=np.float32)
    sizes = emulate_module(mod, source, {"A": A.data, "B": B, "C": C, "IP": A.indptr, "IX": A.indices})
    assert sizes == {"m": 203, "n": 150, "nnz": A.nnz}
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)
    assert not C[0].any() and not C[-1].any()


def test_emulate_kernel_with_launch_dims_equals_scipy_in_process(spmm):
    mod, source = spmm
    A = random_csr(m=64, n=40, seed=3)
    B = np.random.default_rng(4).standard_normal((40, FEAT)).astype(np.float32)
    C = np.zeros((64, FEAT), dtype=np.float32)
    grid, block = launch_dims(mod, sizes={"m": 64})["csr_spmm_kernel"]
    emulate_kernel(source, "csr_spmm_kernel", [A.data, B, C, A.indptr, A.indices, 64], grid, block, isolate=False)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)


def test_launch_dims_are_read_from_the_host_launch(spmm):
    mod, _ = spmm
    assert launch_dims(mod, sizes={"m": 1001}) == {"csr_spmm_kernel": ((251, 1, 1), (32, 4, 1))}
    assert launch_dims(mod, sizes={"m": 4}) == {"csr_spmm_kernel": ((1, 1, 1), (32, 4, 1))}
    assert launch_dims(spmm_schedule(rows_per_block=8), sizes={"m": 17}) == {"csr_spmm_kernel": ((3, 1, 1), (32, 8, 1))}
    with pytest.raises(KeyError, match="'m'"):
        launch_dims(mod, sizes={})


def test_every_kernel_of_a_module_runs_in_host_order():
    sch = s_tir.Schedule(tvm.IRModule({"scale_then_shift": scale_then_shift}))
    sch.work_on("scale_then_shift")
    for name in ("B", "C"):
        (i,) = sch.get_loops(sch.get_sblock(name))
        bx, tx = sch.split(i, [None, 32])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    dims = launch_dims(sch.mod, sizes={"n": 100})
    assert sorted(dims.values()) == [((4, 1, 1), (32, 1, 1))] * 2 and len(dims) == 2
    a = np.arange(100, dtype=np.float32)
    b, c = np.zeros_like(a), np.zeros_like(a)
    emulate_module(sch.mod, cuda_source(sch.mod), [a, b, c])
    np.testing.assert_array_equal(c, a * 2 + 1)


def test_kernels_using_shared_memory_are_refused():
    @T.prim_func(s_tir=True)
    def scale(a: T.handle, b: T.handle):
        T.func_attr({"global_symbol": "scale", "tirx.noalias": True})
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.sblock("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] * T.float32(2)

    sch = s_tir.Schedule(tvm.IRModule({"scale": scale}))
    sch.work_on("scale")
    block = sch.get_sblock("B")
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
    with pytest.raises(EmulationNotValid, match="not valid.*__shared__"):
        emulate_kernel(source, "scale_kernel", [a, np.zeros_like(a), 10], (1,), (64,))


def test_out_of_bounds_writes_are_detected(spmm):
    _, source = spmm
    shifted = source.replace("*(float2*)(C_ptr + (", "*(float2*)(C_ptr + 64 + (")
    assert shifted != source
    A = random_csr(m=8, n=8, seed=5)
    B = np.ones((8, FEAT), dtype=np.float32)
    C = np.zeros((8, FEAT), dtype=np.float32)
    with pytest.raises(EmulationError, match="wrote outside C_ptr.*past the end"):
        emulate_kernel(shifted, "csr_spmm_kernel", [A.data, B, C, A.indptr, A.indices, 8], (2,), (32, 4))


def test_a_crashing_kernel_is_reported_not_fatal(spmm):
    _, source = spmm
    wild = source.replace("*(float2*)(C_ptr + (", "*(float2*)(C_ptr + 1000000000 + (")
    A = random_csr(m=8, n=8, seed=6)
    B = np.ones((8, FEAT), dtype=np.float32)
    C = np.zeros((8, FEAT), dtype=np.float32)
    with pytest.raises(EmulationError, match="crashed"):
        emulate_kernel(wild, "csr_spmm_kernel", [A.data, B, C, A.indptr, A.indices, 8], (2,), (32, 4))


def test_arguments_are_checked_against_the_kernel_signature(spmm):
    _, source = spmm
    A = random_csr(m=8, n=8)
    B = np.ones((8, FEAT), dtype=np.float32)
    C = np.zeros((8, FEAT), dtype=np.float32)
    with pytest.raises(TypeError, match="IP_ptr.*int32.*int64"):
        wrong = [A.data, B, C, A.indptr.astype(np.int64), A.indices, 8]
        emulate_kernel(source, "csr_spmm_kernel", wrong, (2,), (32, 4))
    with pytest.raises(TypeError, match="takes 6 arguments"):
        emulate_kernel(source, "csr_spmm_kernel", [A.data, B, C], (2,), (32, 4))
    with pytest.raises(ValueError, match="not defined"):
        emulate_kernel(source, "no_such_kernel", [], (1,), (1,))
