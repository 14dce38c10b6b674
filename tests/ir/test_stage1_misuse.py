"""Stage I misuse is caught when the body is traced (issue 27, item 6): a sparse buffer indexed in
another order than its axes' (it compiled to a lookup that read missing entries as 0), Python's
max/min/if/and/or on traced expressions (TVM's message named neither ir.max nor ir.where), and a
shape error that names the argument that is wrong (an output with 49 rows blamed J_indptr)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir
from sparsetir import ir
from sparsetir.formats import parse_format
from sparsetir.ops.spmm import spmm_function


def _axes():
    I = ir.dense_fixed("I", 4)
    J = ir.sparse_variable("J", I, 4, 6)
    return I, J


def test_a_sparse_buffer_indexed_in_the_other_order_is_refused():
    I, J = _axes()
    A, C = ir.SparseBuffer("A", (I, J)), ir.SparseBuffer("C", (I, J))
    with pytest.raises(ValueError, match=r"A has axes \(I, J\) but is indexed with J's iterator .* A\[i, j\]"):
        @ir.sparse_iteration([I, J], "SS")
        def swapped(i, j):
            C[i, j] = A[j, i]


def test_a_store_in_the_other_order_is_refused_too_and_the_own_order_traces():
    I, J = _axes()
    A, C = ir.SparseBuffer("A", (I, J)), ir.SparseBuffer("C", (I, J))
    with pytest.raises(ValueError, match="C has axes"):
        @ir.sparse_iteration([I, J], "SS")
        def swapped(i, j):
            C[j, i] = A[i, j]

    @ir.sparse_iteration([I, J], "SS")
    def copy(i, j):
        C[i, j] = A[i, j] * 2.0

    assert copy.name == "copy"


def test_a_dense_operand_read_at_a_sparse_axis_coordinate_stays_allowed():
    I, J = _axes()
    Jd, K = ir.dense_fixed("Jd", 6), ir.dense_fixed("K", 3)
    A, B, C = ir.SparseBuffer("A", (I, J)), ir.SparseBuffer("B", (Jd, K)), ir.SparseBuffer("C", (I, K))

    @ir.sparse_iteration([I, J, K], "SRS")
    def spmm(i, j, k):
        C[i, k] += A[i, j] * B[j, k]

    assert spmm.kinds == "SRS"


@pytest.mark.parametrize("body", ["max", "min", "if", "and"])
def test_python_control_flow_in_a_body_points_to_ir_max_and_ir_where(body):
    I = ir.dense_fixed("I", 4)
    A, C = ir.SparseBuffer("A", (I,)), ir.SparseBuffer("C", (I,))

    def trace():
        @ir.sparse_iteration([I], "S")
        def f(i):
            if body == "max":
                C[i] = max(A[i], ir.cast(0.0, "float32"))
            elif body == "min":
                C[i] = min(A[i], ir.cast(0.0, "float32"))
            elif body == "if":
                C[i] = A[i] if A[i] > 0.0 else ir.cast(0.0, "float32")
            else:
                C[i] = ir.where((A[i] > 0.0) and (A[i] < 1.0), A[i], ir.cast(0.0, "float32"))

    with pytest.raises(TypeError, match=r"ir\.max\(a, b\).*ir\.where\(condition, a, b\)"):
        trace()


def test_a_wrong_output_shape_names_the_output_not_the_structure():
    A = sp.random(50, 50, density=0.1, format="csr", dtype=np.float32, random_state=0)
    function = sparsetir.build(spmm_function(parse_format("csr"), 4))
    arrays = dict(A=A.data, B=np.ones((50, 4), np.float32), J_indptr=A.indptr, J_indices=A.indices)
    with pytest.raises(ValueError, match=r"^C has shape \(49, 4\), expected \(50, 4\)"):
        function(**arrays, C=np.zeros((49, 4), np.float32))
    with pytest.raises(ValueError, match=r"^A has shape \(3,\), expected"):
        function(**{**arrays, "A": A.data[:3]}, C=np.zeros((50, 4), np.float32))
    out = np.zeros((50, 4), np.float32)
    function(**arrays, C=out)
    np.testing.assert_allclose(out, A @ arrays["B"], rtol=1e-5, atol=1e-5)
