"""Staged tiles on CUDA (``schedule/staged_cuda.py``): the tile's product runs as 16x16x16 wmma tiles
(float16/bfloat16 operands, float32 accumulators). Emulated block by block (threads as coroutines
meeting at barriers, whole-tile fragments), the kernels equal the float64 reference on a graph
with empty relations, an empty part, repeated output rows in a tile and padded tiles; channels that
are no multiple of 16 and float32 are refused with a clear error (format=None keeps csf there);
nvcc builds the kernel."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.backend import scheduled_module
from sparsetir.backend.cuda import cuda_source, nvcc_available
from sparsetir.formats import parse_format
from sparsetir.formats.relational import read_relational_input
from sparsetir.ops import compile_rgms
from sparsetir.ops.rgms import CUDA_PARTS, default_format, rgms_function
from sparsetir.reference.rgms import rgms_reference
from sparsetir.testing.cuda_emulator import emulate_module

NVCC, WHY = nvcc_available()
NUMPY_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def graph(m=70, n=50, seed=0):
    """Four relations: one empty, one with a row of many entries (repeated output rows in a tile)."""
    rng = np.random.default_rng(seed)
    relations = [sp.random(m, n, density=0.05, random_state=seed + r, format="csr", dtype=np.float64)
                 for r in range(3)]
    relations[1] = relations[1].tolil()
    relations[1][3, :20] = rng.standard_normal(20)
    relations.insert(2, sp.csr_matrix((m, n)))  # an empty relation
    return read_relational_input([r.tocsr() for r in relations])


def emulated(matrix, f_in, f_out, dtype, fmt="rtile:16:4", seed=0):
    resolved = parse_format(fmt).resolve(matrix)
    numpy_dtype = NUMPY_DTYPES[dtype]
    arrays, sizes, _ = resolved.build(matrix.with_values(dtype), None)
    module = scheduled_module(rgms_function(resolved, f_in, f_out, dtype, "int32", "cuda", "edge", "float32"), "cuda")
    source = cuda_source(module)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((matrix.shape[1], f_in)).astype(numpy_dtype)
    W = (rng.standard_normal((matrix.num_relations, f_in, f_out)) / np.sqrt(f_in)).astype(numpy_dtype)
    Y = np.full((matrix.shape[0], f_out), np.nan, numpy_dtype)
    emulate_module(module, source, {**arrays, "X": X, "W": W, "Y": Y}, sizes=sizes, cooperative=True)
    return source, Y, X, W


@pytest.mark.parametrize(("f_in", "f_out", "dtype", "fmt"), [(16, 32, "float16", "rtile:16:4"),
                                                             (48, 16, "bfloat16", "rtile:32:3")])
def test_emulated_tensor_core_tiles_equal_the_reference(f_in, f_out, dtype, fmt):
    matrix = graph()
    source, Y, X, W = emulated(matrix, f_in, f_out, dtype, fmt)
    for call in ("wmma::load_matrix_sync", "wmma::mma_sync", "wmma::store_matrix_sync", "__shared__"):
        assert call in source, f"{call} missing from the staged tensor-core kernel"
    assert "atomic" not in source  # parts own their rows
    case = rgms_reference(matrix.with_values(dtype), X.astype(np.float64), W.astype(np.float64))
    got = Y.astype(np.float64)
    scale = max(float(np.abs(case.reference).max()), 1.0)
    assert float(np.abs(got - case.reference).max()) <= 1e-2 * scale
    assert np.all(got[case.reference == 0] == 0)  # rows with no entry: zeros, not NaN


@pytest.mark.parametrize(("f_in", "f_out", "dtype", "why"), [(17, 32, "float16", "c_in=17"),
                                                             (16, 3, "bfloat16", "c_out=3"),
                                                             (16, 16, "float32", "float16 or bfloat16")])
def test_what_tensor_cores_cannot_take_is_refused_and_the_default_falls_back(f_in, f_out, dtype, why):
    matrix = graph()
    with pytest.raises(ValueError, match=why):
        compile_rgms(matrix, f_in, f_out, format="rtile", target="cuda", dtype=dtype)
    assert default_format(matrix, f_in, f_out, "cuda") == "csf"


def test_the_cuda_default_stages_tensor_core_tiles_where_the_rule_says_so():
    big = read_relational_input([sp.random(4000, 4000, density=0.003, random_state=r, format="csr")
                                 for r in range(3)])  # about 94 entries per (part, relation) group
    assert default_format(big, 64, 64, "cuda", dtype="float16") == f"rtile:16:{CUDA_PARTS}"
    assert default_format(big, 64, 64, "cuda", dtype="bfloat16") == f"rtile:16:{CUDA_PARTS}"
    assert default_format(big, 64, 64, "cuda", dtype="float32") == "csf"  # no tensor cores for float32
    assert default_format(big, 64, 24, "cuda", dtype="float16") == "csf"  # 24: no multiple of 16
    assert default_format(graph(), 64, 64, "cuda", dtype="float16") == "csf"  # groups far from a tile
    with pytest.raises(ValueError, match="no multiple of 16"):
        default_format(big, 64, 24, "cuda", stage=True, dtype="float16")


@pytest.mark.slow
@pytest.mark.skipif(not NVCC, reason=f"needs nvcc to build CUDA kernels: {WHY}")
def test_nvcc_builds_the_staged_tensor_core_kernel():
    kernel = compile_rgms(graph(), 32, 32, format="rtile:16:4", target="cuda", dtype="float16")
    assert kernel.device == "cuda"
    assert "wmma::mma_sync" in kernel.source
