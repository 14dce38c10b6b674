"""The aggregation kernels (``ops.aggregate``: max/min, their gradient's ties and spread, the row- and
column-scaled mean and their dropout-masked forms) built for CUDA with real device code, and their
generated CUDA checked by emulation against the float64 reference (``reference.aggregate``).

nvcc takes most of a build (about 7 s a kernel here), so the emulated stages take TVM's CUDA source
as the build generates it (``backend.cuda.cuda_source``: the same codegen, without nvcc); the GPU
bundle (``bench/bundle/sage.py``) builds every stage with nvcc, and one stage here is built so too."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.backend import scheduled_module
from sparsetir.backend.cuda import cuda_source, nvcc_available
from sparsetir.backend.fatbin import fatbin_entries
from sparsetir.formats import read_sparse_input
from sparsetir.ops import aggregate
from sparsetir.reference.aggregate import STAGES, TRANSPOSED_STAGES, stage_inputs, stage_reference
from sparsetir.testing.cuda_emulator import emulate_module

NVCC, WHY = nvcc_available()
pytestmark = pytest.mark.skipif(not NVCC, reason=f"needs nvcc to build CUDA kernels: {WHY}")

FEAT = 12  # not a multiple of the lanes: the feature guard is exercised
BUILDERS = {"reduce": lambda reducer: aggregate.reduce_function(reducer, FEAT),
            "ties": lambda _: aggregate.ties_function(FEAT), "spread": lambda _: aggregate.spread_function(FEAT),
            "rows": lambda _: aggregate.row_scaled_function(FEAT),
            "columns": lambda _: aggregate.column_scaled_function(FEAT),
            "rows_masked": lambda _: aggregate.row_scaled_function(FEAT, masked=True),
            "columns_masked": lambda _: aggregate.column_scaled_function(FEAT, masked=True)}
OUTPUTS = {"reduce": "C", "ties": "N", "spread": "D", "rows": "C", "columns": "D", "rows_masked": "C",
           "columns_masked": "D"}


def structure():
    """97 targets x 83 sources, rows 0, 40 and 96 empty, source 5 with no target (an empty row of A^T)."""
    A = sp.random(97, 83, density=0.06, format="csr", random_state=7).tolil()
    A[[0, 40, 96], :] = 0
    A[:, 5] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    return sp.csr_matrix((np.ones(A.nnz, np.float32), A.indices, A.indptr), shape=A.shape)


def bound_structure(A, stage: str):
    bound = A.T.tocsr() if stage in TRANSPOSED_STAGES else A.copy()
    bound.sort_indices()
    return bound


def emulate_stage(stage: str, reducer: str, A, source: str) -> None:
    bound = bound_structure(A, stage)
    inputs = stage_inputs(stage, reducer, A, FEAT, np.random.default_rng(3))
    assert set(inputs) == set(STAGES[stage])
    expected, tolerance = stage_reference(stage, reducer, A, inputs)
    out = np.full(expected.shape, np.nan, np.float32)
    arrays = {**inputs, OUTPUTS[stage]: out, "J_indptr": bound.indptr.astype(np.int32),
              "J_indices": bound.indices.astype(np.int32)}
    emulate_module(scheduled_module(BUILDERS[stage](reducer), "cuda"), source, arrays)
    with np.errstate(invalid="ignore"):  # the identity on an empty row: inf - inf
        close = (out == expected) | (np.abs(out - expected) <= tolerance)
    assert close.all(), f"{stage}: {np.count_nonzero(~close)} entries off, e.g. {out[~close][:3]} vs " \
                        f"{expected[~close][:3]}"


@pytest.mark.parametrize(("stage", "reducer"), [("reduce", "max"), ("reduce", "min"), ("ties", "max"),
                                                 ("spread", "min"), ("rows", "max"), ("columns", "max"),
                                                 ("rows_masked", "max")])
def test_emulated_cuda_aggregation_stage_equals_the_float64_reference(stage, reducer):
    emulate_stage(stage, reducer, structure(), cuda_source(scheduled_module(BUILDERS[stage](reducer), "cuda")))


def test_a_stage_built_with_nvcc_carries_sass_and_its_source_emulates_correctly():
    A = structure()
    kernel = aggregate.aggregation_kernel("columns_masked", "max",
                                          read_sparse_input(bound_structure(A, "columns_masked"), canonical=True),
                                          FEAT, "float32", "cuda")
    assert ("ELF", "sm_90") in {(e.kind, e.arch) for e in fatbin_entries(kernel.function.library)}
    emulate_stage("columns_masked", "max", A, kernel.source)
