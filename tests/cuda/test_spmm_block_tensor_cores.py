"""Block formats' SpMM on tensor cores (``block_kernel=True`` on CUDA: ``ops.spmm.tensor_core_block_function``,
``schedule/staged_cuda.schedule_block_row_cuda``): a block row per CUDA block, its blocks as 16x16x16 wmma tiles
(float16/bfloat16 operands, float32 accumulators). Emulated block by block (threads as coroutines meeting at
barriers, whole-tile fragments), the kernels equal the float64 reference on block-pruned weights, a matrix with
empty block rows and rows past the last block, a single block and no block, with int32 and int64 indices; what
tensor cores cannot take is refused with a ValueError before anything is built."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.backend import scheduled_module
from sparsetir.backend.cuda import cuda_source, nvcc_available
from sparsetir.formats import parse_format
from sparsetir.ops import compile_spmm
from sparsetir.ops.spmm import tensor_core_block_function
from sparsetir.reference.spmm import spmm_reference

NVCC, WHY = nvcc_available()
NUMPY_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
TOLERANCE = {"float16": 1e-2, "bfloat16": 3e-2}  # of the output's largest value (the bundle's half-precision check)


def weights(pattern, dtype: str, seed: int = 0) -> sp.csr_matrix:
    A = sp.csr_matrix(pattern, dtype=np.float64)
    A.data = np.random.default_rng(seed).standard_normal(A.nnz)
    A.data = A.data.astype(NUMPY_DTYPES[dtype]).astype(np.float64)  # exactly representable in dtype
    return A


def emulated(A: sp.csr_matrix, feat: int, fmt: str, dtype: str, idtype: str = "int32", seed: int = 1):
    from sparsetir.testing.cuda_emulator import emulate_module

    resolved = parse_format(fmt).resolve(A)
    converted = resolved.convert(A, dtype=dtype, index_dtype=idtype)
    arrays = {name: np.asarray(array) for name, array in resolved.bind(converted, ["A"], "cuda").items()}
    module = scheduled_module(tensor_core_block_function(resolved, feat, dtype, idtype), "cuda")
    source = cuda_source(module)
    B = np.random.default_rng(seed).standard_normal((A.shape[1], feat)).astype(NUMPY_DTYPES[dtype])
    C = np.full((A.shape[0], feat), np.nan, NUMPY_DTYPES[dtype])
    emulate_module(module, source, {**arrays, "B": B, "C": C}, sizes=resolved.sizes(converted), cooperative=True)
    case = spmm_reference(A, B.astype(np.float64))
    got = C.astype(np.float64)
    scale = max(float(np.abs(case.reference).max()), 1.0)
    assert float(np.abs(got - case.reference).max()) <= TOLERANCE[dtype] * scale
    assert np.all(got[~A.getnnz(axis=1).astype(bool)] == 0)  # rows without an entry: zeros, not NaN
    return source


def test_block_pruned_weights_on_tensor_cores():
    from sparsetir.data.masks import block_pruned

    source = emulated(weights(block_pruned(96, 128, 32, 0.6, seed=2), "float16"), 32, "bsr:32", "float16")
    for call in ("wmma::load_matrix_sync", "wmma::mma_sync", "wmma::store_matrix_sync", "__shared__"):
        assert call in source, f"{call} missing from the tensor-core block kernel"
    assert "atomic" not in source  # a block row per CUDA block: rows apart


@pytest.mark.parametrize(("fmt", "dtype", "idtype"), [("bsr:16", "bfloat16", "int32"), ("dbsr:16", "float16", "int64")])
def test_empty_block_rows_rows_past_the_last_block_one_block_and_none(fmt, dtype, idtype):
    pattern = sp.random(70, 48, density=0.2, format="lil", random_state=3)  # 70 rows: the last block row padded
    pattern[16:48] = 0  # two whole block rows without a block
    emulated(weights(pattern.tocsr(), dtype), 48, fmt, dtype, idtype)
    emulated(weights(sp.csr_matrix(([1.0], ([5], [17])), shape=(9, 32)), dtype), 16, fmt, dtype, idtype)  # one block
    emulated(sp.csr_matrix((20, 32)), 16, fmt, dtype, idtype)  # no block at all: C is zeros


@pytest.mark.parametrize(("fmt", "feat", "dtype", "shape", "why"), [
    ("bsr:16", 24, "float16", (32, 32), "feat=24 is no multiple of 16"),
    ("bsr:8", 32, "float16", (32, 32), "the block=8 is no multiple of 16"),
    ("bsr:16", 32, "float32", (32, 32), "float16 or bfloat16 operands, not float32"),
    ("srbcrs:4:16", 32, "float16", (32, 32), "bsr or dbsr"),
    ("bsr:16", 32, "float16", (32, 40), "40 columns are no multiple of the block 16")])
def test_what_tensor_cores_cannot_take_is_refused_before_building(fmt, feat, dtype, shape, why):
    A = sp.random(*shape, density=0.3, format="csr", random_state=0)
    with pytest.raises(ValueError, match=why):
        compile_spmm(A, feat, format=fmt, target="cuda", dtype=dtype, block_kernel=True)


def test_bad_knob_values_are_refused():
    A = sp.random(32, 32, density=0.3, format="csr", random_state=0)
    with pytest.raises((TypeError, ValueError), match="block_kernel"):
        compile_spmm(A, 32, format="bsr:16", target="cuda", dtype="float16", block_kernel="yes")
    with pytest.raises(ValueError, match="accumulates in float32"):
        compile_spmm(A, 32, format="bsr:16", target="cuda", dtype="float16", block_kernel=True, accum_dtype="float64")


@pytest.mark.slow
@pytest.mark.skipif(not NVCC, reason=f"needs nvcc to build CUDA kernels: {WHY}")
def test_nvcc_builds_the_tensor_core_block_kernel():
    from sparsetir.data.masks import block_pruned

    kernel = compile_spmm(weights(block_pruned(128, 128, 32, 0.5, seed=1), "float16"), 64, format="bsr:32",
                          target="cuda", dtype="float16", block_kernel=True)
    assert kernel.device == "cuda"
    assert "wmma::mma_sync" in kernel.source
    assert kernel.output_shape() == (128, 64) and kernel._shape["B"] == (128, 64)  # B's nb * b rows: A's columns
