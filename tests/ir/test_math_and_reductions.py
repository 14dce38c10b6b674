"""ir.exp/log/sqrt/max/min/where/cast build TIR; `C[i] = ir.max(C[i], x)` is a max reduction (and
min likewise) that starts from its identity, under every schedule the templates emit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tvm import tirx

from sparsetir import ir
from sparsetir.backend import build


def test_math_builds_expressions_and_refuses_mixed_dtypes():
    x = tirx.Var("x", "float32")
    assert "exp" in str(ir.exp(x)) and isinstance(ir.max(x, 0.0), tirx.Max)
    assert str(ir.max(x, 1).b.ty) == "float32"  # a Python number takes the other's dtype
    assert "if_then_else" in str(ir.where(x > 0, x, 0.0))
    assert str(ir.cast(x, "float16").ty) == "float16" and ir.cast(x, "float32") is x
    with pytest.raises(TypeError, match="cast one"):
        ir.max(x, tirx.Var("y", "float64"))
    with pytest.raises(TypeError, match="floating-point"):
        ir.exp(tirx.Var("i", "int32"))
    with pytest.raises(TypeError, match="boolean"):
        ir.where(x, x, x)


def dense_reduction(reducer: str, feat: int, init=ir.IDENTITY):
    m = ir.size_var("m")
    I, K = ir.dense_fixed("I", m), ir.dense_fixed("K", feat)
    X, out = ir.SparseBuffer("X", (I, K)), ir.SparseBuffer("out", (I,))

    @ir.sparse_iteration([I, K], "SR", init=init)
    def reduce(i, k):
        if reducer == "sum":
            out[i] += X[i, k]
        elif reducer == "max":
            out[i] = ir.max(out[i], X[i, k])
        else:
            out[i] = ir.min(X[i, k], out[i])  # either operand order

    return ir.SparseFunction("reduce", [reduce], params=[X, out])


NUMPY = {"sum": np.sum, "max": np.max, "min": np.min}


def test_the_stores_record_their_reducer():
    for reducer in ("sum", "max", "min"):
        (store,) = dense_reduction(reducer, 4).iterations[0].stores
        assert store.reducer == reducer and store.accumulate
    assert "out[i] = max(out[i], X[i, k])" in str(dense_reduction("max", 4))


def test_a_plain_store_in_a_reduction_names_the_reducers():
    m = ir.size_var("m")
    I, K = ir.dense_fixed("I", m), ir.dense_fixed("K", 4)
    X, out = ir.SparseBuffer("X", (I, K)), ir.SparseBuffer("out", (I,))
    with pytest.raises(ValueError, match=r"ir\.max"):
        @ir.sparse_iteration([I, K], "SR")
        def wrong(i, k):
            out[i] = X[i, k]


@pytest.mark.parametrize("reducer", ["max", "min"])
def test_max_and_min_start_from_the_identity_or_from_init(reducer):
    x = np.random.default_rng(0).standard_normal((9, 8)).astype(np.float32) - 10.0
    identity = build(dense_reduction(reducer, 8))
    out = np.full(9, np.nan, np.float32)
    identity(X=x, out=out)
    np.testing.assert_array_equal(out, NUMPY[reducer](x, axis=1))
    start = build(dense_reduction(reducer, 8, init=0.0))
    start(X=x, out=out)
    np.testing.assert_array_equal(out, np.maximum(x.max(1), 0) if reducer == "max" else np.minimum(x.min(1), 0))
    kept = build(dense_reduction(reducer, 8, init=None))
    out = np.full(9, -100.0 if reducer == "min" else 100.0, np.float32)
    kept(X=x, out=out)
    np.testing.assert_array_equal(out, np.full(9, -100.0 if reducer == "min" else 100.0, np.float32))


def test_an_empty_reduction_is_the_identity():
    m, n, nnz = ir.size_vars("m n nnz")
    I = ir.dense_fixed("I", m)
    J = ir.sparse_variable("J", I, n, nnz)
    E, mx = ir.SparseBuffer("E", (I, J)), ir.SparseBuffer("mx", (I,))

    @ir.sparse_iteration([I, J], "SR")
    def rowmax(i, j):
        mx[i] = ir.max(mx[i], E[i, j])

    kernel = build(ir.SparseFunction("rowmax", [rowmax], params=[E, mx]))
    out = np.zeros(3, np.float32)
    kernel(E=np.array([2.0], np.float32), mx=out, J_indptr=np.array([0, 0, 1, 1], np.int32),
           J_indices=np.array([0], np.int32), n=1)
    assert out[0] == -math.inf and out[1] == 2.0 and out[2] == -math.inf


@settings(max_examples=12, deadline=None)
@given(reducer=st.sampled_from(["sum", "max", "min"]), feat=st.sampled_from([1, 7, 16, 64]),
       knobs=st.sampled_from([{}, {"reduce_lanes": 1}, {"reduce_lanes": 4}, {"unroll": 0}, {"parallel": False}]),
       seed=st.integers(0, 100))
def test_every_cpu_schedule_of_a_reduction_equals_numpy(reducer, feat, knobs, seed):
    x = np.random.default_rng(seed).standard_normal((13, feat)).astype(np.float32)
    out = np.full(13, np.nan, np.float32)
    build(dense_reduction(reducer, feat), **knobs)(X=x, out=out)
    np.testing.assert_allclose(out, NUMPY[reducer](x, axis=1), rtol=1e-5, atol=1e-5)
