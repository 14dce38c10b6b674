"""The CPU knob ``prefetch``: gathered rows are prefetched ahead, and every kernel still equals scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import tvm
import tvm_ffi
from sparse_cases import random_dense, tolerance

from sparsetir.backend import scheduled_module
from sparsetir.formats import CSR
from sparsetir.ops import compile_sddmm, compile_spmm, sddmm, spmm
from sparsetir.ops.sddmm import sddmm_function
from sparsetir.ops.spmm import spmm_function
from sparsetir.schedule.prefetch import insert_prefetch, is_prefetch

SPMM_FORMATS = ["csr", "ell:4", "hyb:1:1,2,4,8"]
KNOBS = [{"prefetch": 0}, {"prefetch": 1}, {"prefetch": 8}, {"prefetch": 64},
         {"prefetch": 4, "prefetch_lines": False}, {"prefetch": 64, "prefetch_lines": False}]


def knob_id(knobs: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in knobs.items())


def awkward_matrix(dtype=np.float32) -> sp.csr_matrix:
    """30x40 with empty rows, a 35-entry row (longer than every ELL width and distance) and short rows."""
    rng = np.random.default_rng(7)
    dense = np.where(rng.random((30, 40)) < 0.08, rng.standard_normal((30, 40)), 0.0)
    dense[[0, 11, 29]] = 0.0
    dense[5, :35] = rng.standard_normal(35)
    return sp.csr_matrix(dense.astype(dtype))


def sddmm_reference(A, X, Y) -> np.ndarray:
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    return A.data * np.einsum("ij,ij->i", X[rows].astype(np.float64), Y[A.indices].astype(np.float64))


def prefetches(script_or_mod) -> list:
    found = []
    tvm_ffi.structural_walk(script_or_mod, [(tvm.ir.expr.Call, lambda node: found.append(node) if is_prefetch(node)
                                             else None)])
    return found


@pytest.mark.parametrize("knobs", KNOBS, ids=knob_id)
@pytest.mark.parametrize("fmt", SPMM_FORMATS)
def test_spmm_with_prefetch_equals_scipy(fmt, knobs):
    A = awkward_matrix()
    B = random_dense(40, 32, np.float32, seed=1)
    np.testing.assert_allclose(spmm(A, B, format=fmt, **knobs), A @ B, **tolerance(np.float32))


@pytest.mark.parametrize("knobs", KNOBS, ids=knob_id)
def test_sddmm_with_prefetch_equals_scipy(knobs):
    A = awkward_matrix()
    X, Y = random_dense(30, 32, np.float32, seed=1), random_dense(40, 32, np.float32, seed=2)
    np.testing.assert_allclose(sddmm(A, X, Y, **knobs).data, sddmm_reference(A, X, Y), **tolerance(np.float32))


@pytest.mark.parametrize("fmt", SPMM_FORMATS)
def test_int64_index_kernels_with_prefetch_equal_scipy(fmt):
    A = awkward_matrix(np.float64)
    B = random_dense(40, 16, np.float64, seed=1)
    kernel = compile_spmm(A, 16, format=fmt, index_dtype="int64", prefetch=4)
    assert kernel.spec["index_dtype"] == "int64"
    np.testing.assert_allclose(kernel(B), A @ B, **tolerance(np.float64))
    if fmt == "csr":
        X = random_dense(30, 16, np.float64, seed=2)
        kernel = compile_sddmm(A, 16, index_dtype="int64", prefetch=4)
        np.testing.assert_allclose(kernel(X, B), sddmm_reference(A, X, B), **tolerance(np.float64))


def test_csr_spmm_prefetches_the_row_needed_ahead_clamped_to_the_indices():
    """One call at the top of the loop over a row's non-zeros, for the row ``d`` positions on."""
    script = scheduled_module(spmm_function(CSR(), 32), "llvm", prefetch=8, prefetch_lines=False).script()
    assert ('T.address_of(B[J_indices[T.min(J_indptr[vi] + (j + 8), nnz - 1)], 0])' in script)
    loop = script.index("for j in range(J_indptr[vi + 1] - J_indptr[vi]):")
    assert script.index("llvm.prefetch", loop) < script.index("for k_0", loop)


def test_prefetch_lines_prefetches_every_cache_line_of_the_row():
    # 64 float32 = 4 lines of 64 bytes
    first_only = scheduled_module(spmm_function(CSR(), 64), "llvm", prefetch=8, prefetch_lines=False)
    assert len(prefetches(first_only)) == 1
    mod = scheduled_module(spmm_function(CSR(), 64), "llvm", prefetch=8)
    assert [str(call.args[1].args[0].indices[-1]) for call in prefetches(mod)] == ["0", "16", "32", "48"]


def test_prefetch_reaches_the_compiled_kernel():
    A = awkward_matrix()
    assert "llvm.prefetch" in compile_spmm(A, 32, prefetch=8).source
    assert "llvm.prefetch" not in compile_spmm(A, 32).source
    assert "llvm.prefetch" in compile_sddmm(A, 32, prefetch=8).source
    assert "llvm.prefetch" not in compile_sddmm(A, 32, prefetch=0).source


@pytest.mark.parametrize("make", [lambda: spmm_function(CSR(), 32),
                                  lambda: sddmm_function(CSR(), 32, sparse_fuse=False)], ids=["spmm", "sddmm"])
def test_prefetch_off_leaves_the_schedule_unchanged(make):
    default = scheduled_module(make(), "llvm")
    assert tvm_ffi.structural_equal(scheduled_module(make(), "llvm", prefetch=0, prefetch_lines=False), default)
    assert not prefetches(default)
    assert insert_prefetch(default, 0) is default


def test_only_gathers_through_an_input_index_array_are_prefetched():
    """Fused SDDMM reads ``X`` at a row found by a search (a local buffer): only ``Y`` is prefetched."""
    mod = scheduled_module(sddmm_function(CSR(), 32, sparse_fuse=True), "llvm", prefetch=4, prefetch_lines=False)
    (call,) = prefetches(mod)
    assert call.args[1].args[0].source.name == "Y"
    assert "T.min(ij + 4, nnz - 1)" in mod.script()


@pytest.mark.parametrize("knobs", [{"prefetch": -1}, {"prefetch": 2.5}, {"prefetch": True}, {"prefetch": "8"},
                                   {"prefetch": None}, {"prefetch": 4, "prefetch_lines": "yes"}], ids=knob_id)
def test_bad_prefetch_values_raise_value_error(knobs):
    with pytest.raises(ValueError, match="prefetch"):
        scheduled_module(spmm_function(CSR(), 8), "llvm", **knobs)
