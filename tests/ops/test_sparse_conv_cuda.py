"""Sparse 3-D convolution as CUDA: both dataflows (output-stationary csf, gather-GEMM-scatter relcsr
with atomics) build with nvcc and, run block by block in the CUDA-C emulator, equal the float64
reference."""

from __future__ import annotations

import numpy as np
import pytest

from sparsetir.ops import compile_sparse_conv3d, kernel_map
from sparsetir.reference.conv import conv_reference

C_IN, C_OUT = 3, 5


def random_cloud(n, extent, batches=1, seed=0):
    rng = np.random.default_rng(seed)
    return np.unique(np.c_[rng.integers(0, batches, n), rng.integers(0, extent, (n, 3))], axis=0)


def operands(n, K, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, C_IN)).astype(np.float32),
            (rng.standard_normal((K, C_IN, C_OUT)) / np.sqrt(C_IN)).astype(np.float32))


def assert_matches(Y, kmap, X, W):
    case = conv_reference(kmap, X, W)
    excess = np.abs(np.asarray(Y, dtype=np.float64) - case.reference) - case.tolerance
    assert (excess <= 0).all(), f"worst excess {excess.max():.3g}"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csf", "relcsr"], ids=["output-stationary", "gather-gemm-scatter"])
def test_emulated_cuda(fmt):
    from sparsetir.backend import scheduled_module
    from sparsetir.backend.cuda import nvcc_available
    from sparsetir.formats import parse_format
    from sparsetir.ops import rgms_function
    from sparsetir.testing.cuda_emulator import emulate_module

    available, why = nvcc_available()
    if not available:
        pytest.skip(f"needs nvcc: {why}")
    coords = random_cloud(60, 5, batches=2, seed=1)
    kmap = kernel_map(coords, stride=2)
    X, W = operands(len(coords), 27)
    kernel = compile_sparse_conv3d(kmap, C_IN, C_OUT, format=fmt, target="cuda")
    assert ("atomic" in kernel.source) == (fmt == "relcsr")  # offsets outermost write the same outputs
    resolved = parse_format(fmt).resolve(kmap.relational())
    module = scheduled_module(rgms_function(resolved, C_IN, C_OUT, idtype=kernel.spec["index_dtype"], device="cuda",
                                            dataflow="edge", feature_loops="lk"), "cuda")
    Y = np.full((kmap.num_outputs, C_OUT), np.nan, np.float32)
    emulate_module(module, kernel.source, {**{k: np.array(v) for k, v in kernel._bound.items()}, "X": X, "W": W,
                                           "Y": Y}, sizes=kernel.sizes)
    assert_matches(Y, kmap, X, W)
