"""Tensor-core candidates in the GPU bundle: a CUDA bundle adds the staged tiles on tensor cores (float16) to
the conv and R-GCN candidates where the channels are multiples of 16 (none in a CPU bundle); the runner gives
such a candidate its inputs in its dtype and checks it against the float64 result of the rounded inputs with
a half-precision tolerance. Run here through the same factories with a CPU float16 staged kernel."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.bench.bundle.candidates import candidate_label, half_precision_case, rounded_to
from sparsetir.bench.bundle.conv import DEFAULT_CONV_CONFIGS, TENSOR_CORE_CONV_CONFIGS, conv_configs
from sparsetir.bench.bundle.rgcn import (
    DEFAULT_RGCN_CONFIGS,
    TENSOR_CORE_RGCN_CONFIGS,
    rgcn_configs,
    rounded_inputs,
)
from sparsetir.bench.engine import Row, prepare
from sparsetir.formats.relational import read_relational_input
from sparsetir.ops import compile_rgms, compile_sparse_conv3d, kernel_map
from sparsetir.ops.rgms import CUDA_PARTS
from sparsetir.reference.conv import conv_reference
from sparsetir.reference.rgcn import rgcn_inputs, rgcn_reference


def test_cuda_bundles_add_tensor_core_candidates_where_the_channels_allow():
    assert TENSOR_CORE_CONV_CONFIGS[0]["format"] == TENSOR_CORE_RGCN_CONFIGS[0]["format"] == f"rtile:16:{CUDA_PARTS}"
    assert conv_configs("cuda", 32, 64) == [*DEFAULT_CONV_CONFIGS, *TENSOR_CORE_CONV_CONFIGS]
    assert conv_configs("cuda", 4, 32) == list(DEFAULT_CONV_CONFIGS)  # c_in 4: no multiple of 16
    assert conv_configs("cpu", 32, 64) == list(DEFAULT_CONV_CONFIGS)
    assert conv_configs("cuda", 32, 64, limit=1) == [DEFAULT_CONV_CONFIGS[0], *TENSOR_CORE_CONV_CONFIGS]
    assert rgcn_configs("cuda", (32, 32, 32)) == [*DEFAULT_RGCN_CONFIGS, *TENSOR_CORE_RGCN_CONFIGS]
    assert rgcn_configs("cuda", (32, 24, 32)) == list(DEFAULT_RGCN_CONFIGS)  # 24: no multiple of 16
    assert rgcn_configs("llvm", (32, 32, 32)) == list(DEFAULT_RGCN_CONFIGS)
    assert candidate_label(TENSOR_CORE_RGCN_CONFIGS[0], "format", "dataflow") == \
        f"sparsetir[rtile:16:{CUDA_PARTS} edge float16]"
    assert candidate_label(DEFAULT_CONV_CONFIGS[0], "format") == "sparsetir[csf]"


def test_rounding_and_the_half_precision_check():
    x = np.array([1.0, 1.0 + 2.0 ** -12, 3.14159], np.float32)
    assert rounded_to(x, "float16")[1] == 1.0 and rounded_to(x, "float32")[1] == x[1]
    assert abs(rounded_to(x, "bfloat16")[2] - 3.140625) < 1e-7
    case = conv_reference(kernel_map(np.array([[0, 0, 0, 0]])), np.ones((1, 2), np.float32),
                          np.ones((27, 2, 1), np.float32))
    assert half_precision_case(case, "float32") is case
    assert np.all(half_precision_case(case, "float16").tolerance == pytest.approx(2e-2))  # 1e-2 of the output 2


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_half_conv_candidate_passes_the_check_the_runner_gives_it(dtype, tmp_path):
    from sparsetir.bench.bundle.conv import candidate_factory
    from sparsetir.bench.families.conv import ConvLayer, parse_layer

    rng = np.random.default_rng(0)
    coords = np.unique(np.c_[np.zeros(300, int), rng.integers(0, 8, (300, 3))], axis=0)
    kmap = kernel_map(coords)
    X = rng.standard_normal((len(coords), 16)).astype(np.float32)
    W = (rng.standard_normal((27, 16, 32)) / 12).astype(np.float32)
    kernel = compile_sparse_conv3d(kmap, 16, 32, format="rtile:16:4", dtype=dtype)
    library = kernel.export(tmp_path / "conv.so")
    layer = ConvLayer(parse_layer("16:32:1@0"), coords, X, W, 3, 1, 1, True, None, kmap)
    check = half_precision_case(conv_reference(kmap, rounded_to(X, dtype), rounded_to(W, dtype)), dtype)
    row = prepare(Row("sparsetir[rtile]", "compile"), candidate_factory(library, layer, "cpu", dtype), check)
    assert row.error is None and row.run is not None
    exact = prepare(Row("exact", "compile"), candidate_factory(library, layer, "cpu", dtype),
                    conv_reference(kmap, X, W))
    assert exact.error is not None  # the float32 tolerance refuses it: the widened check is what lets it pass


def test_a_half_rgcn_candidate_passes_the_check_the_runner_gives_it(tmp_path):
    from sparsetir.bench.bundle.rgcn import _shape_key, candidate_factory
    from sparsetir.nn.rgcn import RGCNGraph
    from sparsetir.reference import Case

    graph = read_relational_input([(sp.random(120, 120, density=0.05, random_state=r, format="csr") != 0)
                                   .astype(np.float32) for r in range(3)])
    prepared = RGCNGraph(graph)
    inputs = rgcn_inputs(graph, (16, 32, 16), seed=1)
    libraries = {}
    for shape in ((16, 32), (32, 16)):
        kernel = compile_rgms(prepared.matrix, *shape, format="rtile:16:4", dtype="float16")
        libraries[_shape_key(shape)] = kernel.export(tmp_path / f"rgcn-{shape[0]}x{shape[1]}.so")
    rounded = rounded_inputs(inputs, "float16")
    check = half_precision_case(Case((rounded.X,), *rgcn_reference(rounded), 0), "float16")
    row = prepare(Row("sparsetir[rtile edge float16]", "compile"),
                  candidate_factory(libraries, inputs, "cpu", "float16"), check)
    assert row.error is None and row.run is not None


def test_cuda_prunedbert_bundles_add_tensor_core_block_rows_where_the_weight_allows():
    from sparsetir.bench.bundle.attention import (
        DEFAULT_PRUNEDBERT_FORMATS,
        TENSOR_CORE_PRUNEDBERT_CONFIGS,
        prunedbert_configs,
    )

    plain = {contender: {"format": fmt} for contender, fmt in DEFAULT_PRUNEDBERT_FORMATS.items()}
    assert prunedbert_configs("cuda", None, (2048, 512), 256) == {**plain, **TENSOR_CORE_PRUNEDBERT_CONFIGS}
    assert prunedbert_configs("cuda", None, (2048, 520), 256) == plain  # columns: no multiple of 16 or 32
    assert prunedbert_configs("cuda", None, (2048, 512), 24) == plain  # tokens: no multiple of 16
    assert prunedbert_configs("cpu", None, (2048, 512), 256) == plain
    assert list(prunedbert_configs("cuda", None, (64, 48), 32)) == [*plain, "sparsetir-bsr-16-wmma-bfloat16"]


def test_a_half_prunedbert_candidate_passes_the_check_the_runner_gives_it(tmp_path):
    from sparsetir.bench.bundle.candidates import candidate_factory
    from sparsetir.data.masks import block_pruned
    from sparsetir.ops import compile_spmm
    from sparsetir.reference.spmm import spmm_reference

    rng = np.random.default_rng(0)
    A = sp.csr_matrix(block_pruned(64, 64, 16, 0.5, seed=0), dtype=np.float32)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    B = rng.standard_normal((64, 32)).astype(np.float32)
    library = compile_spmm(A, 32, format="bsr:16", dtype="float16").export(tmp_path / "prunedbert.so")
    rounded = A.copy()
    rounded.data = rounded_to(A.data, "float16")
    B16 = rounded_to(B, "float16")
    row = prepare(Row("sparsetir-bsr-16-float16", "compile"), candidate_factory(library, B16, "cpu", "float16"),
                  half_precision_case(spmm_reference(rounded, B16), "float16"))
    assert row.error is None and row.run is not None
    exact = prepare(Row("exact", "compile"), candidate_factory(library, B16, "cpu", "float16"), spmm_reference(A, B))
    assert exact.error is not None  # the float32 tolerance refuses it: the widened check is what lets it pass
