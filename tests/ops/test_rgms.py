"""RGMS (``Y = sum_r A_r X W_r``) against a float64 numpy reference: every relational format and
dataflow on real R-GCN graphs and on awkward hypothesis graphs (relations with no edges,
isolated nodes, one relation, rectangular, int64 indices), emulated CUDA, values=, torch."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparsetir.formats import parse_format
from sparsetir.formats.relational import RelationalMatrix, read_relational_input
from sparsetir.ops import compile_rgms, rgms, rgms_function
from sparsetir.reference.rgms import rgms_reference

FORMATS = ("csf", "relcsr", "ell3d", "ell3d:1,4")
DATAFLOWS = ("edge", "aggregate", "transform")


def relational(name: str) -> RelationalMatrix:
    from sparsetir import data

    try:
        return read_relational_input(data.load_relational(name))
    except (FileNotFoundError, OSError) as error:
        pytest.skip(f"relational graph {name} unavailable: {error}")


def operands(matrix, f_in, f_out, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((matrix.shape[1], f_in)).astype(dtype)
    W = (rng.standard_normal((matrix.num_relations, f_in, f_out)) / np.sqrt(f_in)).astype(dtype)
    return X, W


def assert_matches(Y, matrix, X, W):
    case = rgms_reference(matrix, X, W)
    got = np.asarray(Y, dtype=np.float64)
    assert got.shape == case.reference.shape
    excess = np.abs(got - case.reference) - case.tolerance
    assert (excess <= 0).all(), f"worst excess {excess.max():.3g}"


def random_relations(R, m, n, density, seed):
    return [sp.random(m, n, density=density, format="csr", dtype=np.float32, random_state=seed + r)
            for r in range(R)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_every_format_and_dataflow_on_a_small_graph(fmt, dataflow):
    matrices = random_relations(5, 40, 40, 0.08, 3)
    matrices[1] = sp.csr_matrix((40, 40), dtype=np.float32)  # a relation with no edges
    matrix = read_relational_input(matrices)
    X, W = operands(matrix, 8, 6)
    assert_matches(rgms(matrices, X, W, format=fmt, dataflow=dataflow), matrix, X, W)


@pytest.mark.slow
@pytest.mark.parametrize("name,fmt", [("aifb", "csf"), ("aifb", "relcsr"), ("aifb", "ell3d"), ("mutag", "csf")])
def test_real_rgcn_graphs(name, fmt):
    matrix = relational(name)
    X, W = operands(matrix, 32, 32)
    assert_matches(rgms(matrix, X, W, format=fmt, dataflow="aggregate"), matrix, X, W)


def test_real_graph_default_format_and_dataflow():
    matrix = relational("aifb")
    X, W = operands(matrix, 16, 16)
    kernel = compile_rgms(matrix, 16, 16)
    assert kernel.spec["dataflow"] == "aggregate"  # fewer flops than per-edge products whenever rows repeat
    assert_matches(kernel(X, W), matrix, X, W)


@st.composite
def relational_inputs(draw):
    R = draw(st.integers(1, 4))
    m = draw(st.integers(0, 12))
    n = draw(st.integers(0, 12))
    matrices = []
    for _ in range(R):
        density = draw(st.sampled_from([0.0, 0.1, 0.4, 1.0]))
        seed = draw(st.integers(0, 1000))
        A = sp.random(m, n, density=density, format="csr", dtype=np.float64, random_state=seed) if m and n else \
            sp.csr_matrix((m, n))
        index_dtype = draw(st.sampled_from([np.int32, np.int64]))
        A = sp.csr_matrix((A.data.astype(np.float32), A.indices.astype(index_dtype), A.indptr.astype(index_dtype)),
                          shape=(m, n))
        matrices.append(A)
    return matrices


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(relational_inputs(), st.sampled_from(FORMATS), st.sampled_from(DATAFLOWS))
def test_awkward_graphs(matrices, fmt, dataflow):
    matrix = read_relational_input(matrices)
    X, W = operands(matrix, 4, 3)
    assert_matches(rgms(matrices, X, W, format=fmt, dataflow=dataflow), matrix, X, W)


def test_int64_indices_and_unsorted_duplicate_input():
    rows = np.array([3, 0, 3, 2, 3], dtype=np.int64)
    cols = np.array([1, 2, 1, 0, 4], dtype=np.int64)
    A0 = sp.coo_matrix((np.ones(5, np.float32), (rows, cols)), shape=(5, 6)).tocsr()  # duplicate (3, 1) summed
    A0.indices, A0.indptr = A0.indices.astype(np.int64), A0.indptr.astype(np.int64)
    A1 = sp.csr_matrix((5, 6), dtype=np.float32)
    X, W = operands(read_relational_input([A0, A1]), 3, 2)
    for fmt in FORMATS:
        Y = rgms([A0, A1], X, W, format=fmt, index_dtype="int64")
        assert_matches(Y, read_relational_input([A0, A1]), X, W)
    expected_row3 = 2 * X[1] @ W[0] + X[4] @ W[0]
    np.testing.assert_allclose(Y[3], expected_row3, rtol=1e-5)


@pytest.mark.parametrize("fmt", FORMATS)
def test_values_follow_the_input_order(fmt):
    matrices = random_relations(3, 30, 20, 0.15, 7)
    matrix = read_relational_input(matrices)
    X, W = operands(matrix, 5, 4)
    kernel = compile_rgms(matrices, 5, 4, format=fmt)
    new = np.random.default_rng(1).standard_normal(matrix.nnz).astype(np.float32)
    reweighted = RelationalMatrix(matrix.shape, matrix.num_relations, matrix.indptr, matrix.indices, new)
    assert_matches(kernel(X, W, values=new), reweighted, X, W)
    assert_matches(kernel(X, W), matrix, X, W)  # the compiled values are unchanged


def test_torch_in_torch_out_and_out():
    matrices = random_relations(3, 25, 25, 0.1, 11)
    matrix = read_relational_input(matrices)
    X, W = (torch.from_numpy(a) for a in operands(matrix, 6, 6))
    out = torch.empty(25, 6)
    result = rgms(matrices, X, W, out=out)
    assert result is out
    assert_matches(out.numpy(), matrix, X.numpy(), W.numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_accumulates_in_float32(dtype):
    matrices = random_relations(3, 30, 30, 0.2, 5)
    matrix = read_relational_input(matrices)
    X, W = operands(matrix, 8, 8)
    torch_dtype = getattr(torch, dtype)
    Xh, Wh = torch.from_numpy(X).to(torch_dtype), torch.from_numpy(W).to(torch_dtype)
    Y = rgms(matrices, Xh, Wh, dataflow="aggregate")
    assert Y.dtype == torch_dtype
    reference = rgms_reference(matrix, Xh.float().numpy(), Wh.float().numpy()).reference
    scale = np.abs(reference).max()
    np.testing.assert_allclose(Y.float().numpy(), reference, atol=(2e-2 if dtype == "bfloat16" else 4e-3) * scale)


def test_bad_input_is_refused_before_any_kernel_runs():
    matrices = random_relations(2, 10, 8, 0.2, 1)
    X, W = operands(read_relational_input(matrices), 4, 3)
    with pytest.raises(ValueError, match="share one shape"):
        rgms([matrices[0], sp.csr_matrix((9, 8))], X, W)
    with pytest.raises(ValueError, match="X needs 8 rows"):
        rgms(matrices, X[:5], W)
    with pytest.raises(ValueError, match=r"W must be \(2, 4, f_out\)"):
        rgms(matrices, X, W[:1])
    with pytest.raises(TypeError, match="one type and dtype"):
        rgms(matrices, X, W.astype(np.float64))
    with pytest.raises(TypeError, match="relational graph"):
        rgms(sp.csr_matrix((10, 8)), X, W)
    with pytest.raises(ValueError, match="relational format"):
        rgms(matrices, X, W, format="csr")
    with pytest.raises(ValueError, match="dataflow must be one of"):
        rgms(matrices, X, W, dataflow="gather")
    with pytest.raises(ValueError, match="strictly increasing"):
        rgms(matrices, X, W, format="ell3d:4,2")


def test_a_relational_graph_is_read_with_targets_as_rows():
    from sparsetir.data.rdf_graph import RelationalGraph

    graph = RelationalGraph(3, ("a", "b"), np.array([0, 0, 2]), np.array([1, 0, 1]), np.array([1, 2, 1]))
    matrix = read_relational_input(graph)  # edges subject -> object: A_r[object, subject] = 1
    relation, row, col = matrix.coordinates()
    assert sorted(zip(relation.tolist(), row.tolist(), col.tolist())) == [(0, 2, 0), (1, 1, 0), (1, 1, 2)]


# rows outermost without atomics; relations outermost with atomics and an intermediate; parts with
# split rows and a per-part intermediate (the schedule's in-place reduction)
NVCC_CASES = [("csf", "aggregate"), ("relcsr", "transform"), ("ell3d:1,4", "aggregate")]


@pytest.mark.parametrize("fmt,dataflow", NVCC_CASES)
def test_emulated_cuda(fmt, dataflow):
    from sparsetir.backend import scheduled_module
    from sparsetir.backend.cuda import nvcc_available
    from sparsetir.testing.cuda_emulator import emulate_module

    available, why = nvcc_available()
    if not available:
        pytest.skip(f"needs nvcc: {why}")
    matrices = random_relations(4, 30, 25, 0.12, 2)
    matrices[2] = sp.csr_matrix((30, 25), dtype=np.float32)
    matrix = read_relational_input(matrices)
    X, W = operands(matrix, 8, 5)
    kernel = compile_rgms(matrices, 8, 5, format=fmt, dataflow=dataflow, target="cuda")
    assert ("atomic" in kernel.source) == (not fmt.startswith("csf"))  # only rows-outermost csf needs none
    resolved = parse_format(fmt).resolve(matrix)
    module = scheduled_module(rgms_function(resolved, 8, 5, idtype=kernel.spec["index_dtype"], device="cuda",
                                            dataflow=dataflow), "cuda")
    Y = np.full((30, 5), np.nan, np.float32)
    emulate_module(module, kernel.source, {**{k: np.array(v) for k, v in kernel._bound.items()}, "X": X, "W": W,
                                           "Y": Y}, sizes=kernel.sizes)
    assert_matches(Y, matrix, X, W)
