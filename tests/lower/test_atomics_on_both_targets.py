"""atomic=True builds for LLVM and CUDA: the same relation-outermost RGCN (R -> I -> J) and scatter
convolution are correct on the CPU (collision-prone loops stay serial, updates are plain) and on
emulated CUDA (parallel over the outer loops, atomic updates); without atomic=True the CUDA
template refuses a nest whose parallel instances may collide."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from ir_programs import rgcn_arrays, rgcn_relation_outermost, scatter_arrays, scatter_conv

from sparsetir.backend import build, scheduled_module
from sparsetir.backend.cuda import nvcc_available

NVCC, WHY = nvcc_available()
needs_nvcc = pytest.mark.skipif(not NVCC, reason=f"needs nvcc: {WHY}")


def rgcn_case(relations=4, m=25, f_in=6, f_out=5):
    matrices = [sp.random(m, m, density=0.15, format="csr", dtype=np.float32, random_state=r) for r in range(relations)]
    matrices[1] = sp.csr_matrix((m, m), dtype=np.float32)  # a relation with no edges
    rng = np.random.default_rng(0)
    X = rng.standard_normal((m, f_in)).astype(np.float32)
    W = rng.standard_normal((relations, f_in, f_out)).astype(np.float32)
    return rgcn_arrays(matrices, X, W)


def test_relation_outermost_rgcn_on_the_cpu_is_serial_plain_and_correct():
    args, sizes, reference = rgcn_case()
    func = rgcn_relation_outermost(6, 5)
    script = scheduled_module(func, "llvm").script()
    assert "atomic" not in script  # plain updates
    assert script.count("T.parallel") == 1  # only the fill of Y: R is a reduction, one instance at a time
    Y = np.full((25, 5), np.nan, np.float32)
    build(func)(**args, Y=Y, **sizes)
    np.testing.assert_allclose(Y, reference, rtol=1e-4, atol=1e-4)


def test_scatter_convolution_on_the_cpu():
    args, sizes, reference = scatter_arrays(np.random.default_rng(1), 5, 30, 17, 13, 4, 6)
    build(scatter_conv(4, 6))(**args, **sizes)
    np.testing.assert_allclose(args["Out"], reference, rtol=1e-4, atol=1e-4)


@needs_nvcc
def test_relation_outermost_rgcn_and_scatter_conv_on_emulated_cuda():
    from sparsetir.testing.cuda_emulator import emulate_module

    args, sizes, reference = rgcn_case()
    func = rgcn_relation_outermost(6, 5)
    kernel = build(func, "cuda")
    assert "atomic" in kernel.source
    Y = np.full((25, 5), np.nan, np.float32)
    emulate_module(scheduled_module(func, "cuda"), kernel.source, {**args, "Y": Y}, sizes=sizes)
    np.testing.assert_allclose(Y, reference, rtol=1e-4, atol=1e-4)

    args, sizes, reference = scatter_arrays(np.random.default_rng(2), 3, 20, 11, 9, 4, 4)
    func = scatter_conv(4, 4)
    emulate_module(scheduled_module(func, "cuda"), build(func, "cuda").source, args, sizes=sizes)
    np.testing.assert_allclose(args["Out"], reference, rtol=1e-4, atol=1e-4)


def test_cuda_refuses_collisions_without_atomic():
    with pytest.raises(ValueError, match="atomic=True"):
        scheduled_module(rgcn_relation_outermost(6, 5, atomic=False), "cuda")


@needs_nvcc
def test_an_atomic_max_builds_for_cuda_with_its_helper(tmp_path):
    from sparsetir import ir
    from sparsetir.backend.cuda import with_atomic_helpers

    nk, npairs, nout = ir.size_vars("nk npairs nout")
    Kx, P, Nout = ir.dense_fixed("Kx", nk), ir.dense_fixed("P", npairs), ir.dense_fixed("Nout", nout)
    Idx, V = ir.SparseBuffer("Idx", (Kx, P), "int32"), ir.SparseBuffer("V", (Kx, P))
    Out = ir.SparseBuffer("Out", (Nout,))

    @ir.sparse_iteration([Kx, P], "RR", atomic=True)
    def scatter_max(k, p):
        Out[Idx[k, p]] = ir.max(Out[Idx[k, p]], V[k, p])

    func = ir.SparseFunction("scatter_max", [scatter_max], params=[Idx, V, Out])
    kernel = build(func, "cuda")  # compiles with nvcc: the helper is defined
    assert "sparsetir_atomic_max" in kernel.source
    assert "sparsetir_atomic_max(float* address" in with_atomic_helpers(kernel.source)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 7, (3, 10)).astype(np.int32)
    values = rng.standard_normal((3, 10)).astype(np.float32)
    reference = np.full(7, -np.inf, np.float32)
    np.maximum.at(reference, idx.reshape(-1), values.reshape(-1))
    out = np.full(7, np.nan, np.float32)
    build(func)(Idx=idx, V=values, Out=out, nout=7)
    np.testing.assert_array_equal(out, reference)
    from sparsetir.testing.cuda_emulator import emulate_module

    out = np.full(7, np.nan, np.float32)
    emulate_module(scheduled_module(func, "cuda"), kernel.source, {"Idx": idx, "V": values, "Out": out},
                   sizes={"nk": 3, "npairs": 10, "nout": 7})
    np.testing.assert_array_equal(out, reference)
    # A NaN value reaches its output (numpy's maximum and torch's amax propagate it), whether the
    # reduction meets it first or last: the CPU's float max and the atomic helper both keep it.
    values[0, 0], values[2, 9] = np.nan, np.nan
    reference = np.full(7, -np.inf, np.float32)
    np.maximum.at(reference, idx.reshape(-1), values.reshape(-1))
    assert np.isnan(reference).sum() >= 1
    out = np.zeros(7, np.float32)
    build(func)(Idx=idx, V=values, Out=out, nout=7)
    np.testing.assert_array_equal(out, reference)
    out = np.zeros(7, np.float32)
    emulate_module(scheduled_module(func, "cuda"), kernel.source, {"Idx": idx, "V": values, "Out": out},
                   sizes={"nk": 3, "npairs": 10, "nout": 7})
    np.testing.assert_array_equal(out, reference)
