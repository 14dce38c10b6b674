"""format_decompose, horizontal_fuse and specialize: the printed IR before and after, and their errors."""

from __future__ import annotations

import numpy as np
import pytest
from sparse_cases import random_dense, real_graph, tolerance
from stage1_examples import csr_spmm

import sparsetir
from sparsetir import ir
from sparsetir.formats import ELL, Hyb
from sparsetir.formats.structure import SourceAxes
from sparsetir.lower import lower, lower_sparse_iter
from sparsetir.transform import FormatRewriteRule, format_decompose, horizontal_fuse, specialize


def decomposed_spmm(fmt, device="cpu"):
    func, (I, J, K) = csr_spmm(16)
    A = func.buffers[0]
    return format_decompose(func, fmt.rewrite_rules(SourceAxes(I, J, [A], "S", "R"), device))


def test_ell_splits_spmm_into_an_ell_part_and_a_remainder():
    text = str(decomposed_spmm(ELL(4)))
    assert "with sparse_iteration([I, J_ell, K], 'SRS', name='spmm_ell') as (i, j_ell, k):" in text
    # the ELL part is padded: a slot holding -0.0 (padding) contributes nothing (ir.padding)
    assert ('    C[i, k] += A_ell[i, j_ell] * T.reinterpret("float32", T.reinterpret("uint32", B[j_ell, k]) & '
            'T.Cast("uint32", T.reinterpret("uint32", A_ell[i, j_ell]) != T.uint32(2147483648)) * T.uint32(4294967295))'
            ) in text
    assert "    C[i, k] += A_rem[i, j_rem] * B[j_rem, k]" in text
    assert "with sparse_iteration([I, J_rem, K], 'SRS', name='spmm_rem', init=None)" in text


def test_hyb_fills_the_output_once_then_every_bucket_accumulates():
    text = str(decomposed_spmm(Hyb(2, (1, 4))))
    assert "name='spmm_C_init'" in text
    assert text.count("init=None") == 4, "two parts x two buckets accumulate"
    assert "I_p1b1 = sparse_fixed(None, length=m, nnz_cols=uniq_p1b1)" in text
    assert "P_p1b1 = dense_variable(I_p1b1" in text, "the largest bucket groups split pieces by row"


def test_a_decomposed_function_computes_what_the_original_does():
    A = real_graph("cora")
    B = random_dense(A.shape[1], 16, np.float32)
    fmt = ELL(3)
    matrix = fmt.convert(A)
    compiled = sparsetir.build(decomposed_spmm(fmt))
    C = np.full((A.shape[0], 16), np.nan, np.float32)
    compiled(**fmt.bind(matrix, ["A"]), B=B, C=C)
    np.testing.assert_allclose(C, A @ B, **tolerance(np.float32))


def test_format_decompose_refuses_rules_over_other_loops():
    func, (I, J, K) = csr_spmm()
    A = func.buffers[0]
    rules = ELL(2).rewrite_rules(SourceAxes(I, J, [A], "S", "R"), "cpu")
    shifted = FormatRewriteRule("x", (J, K), rules[0].axes, "SR", {}, lambda v: {})
    with pytest.raises(ValueError, match="consecutive"):
        format_decompose(func, [FormatRewriteRule("y", (I, K), rules[0].axes, "SR", {}, lambda v: {})])
    with pytest.raises(ValueError, match="must give 'S'/'R'"):
        FormatRewriteRule("z", (I, J), rules[0].axes, "S", {}, lambda v: {})
    assert shifted.name == "x"


def test_horizontal_fuse_gives_one_loop_with_a_guard_per_member():
    func = horizontal_fuse(decomposed_spmm(Hyb(1, (1, 2))), ["spmm_p0b0", "spmm_p0b1"], disjoint=True)
    text = str(lower_sparse_iter(func))
    # the largest bucket iterates its unique rows on the CPU (pieces of a row stay together)
    assert "for g in grid(rows_p0b0 + uniq_p0b1):  # horizontally fused" in text
    assert "if 0 <= g < rows_p0b0:  # i_p0b0 = g - 0" in text
    assert "if rows_p0b0 <= g < rows_p0b0 + uniq_p0b1:  # i_p0b1 = g - rows_p0b0" in text


def test_horizontal_fuse_needs_root_outer_loops_and_consecutive_iterations():
    func, _ = csr_spmm()
    two = decomposed_spmm(Hyb(1, (1, 2, 4)))
    with pytest.raises(ValueError, match="at least two"):
        horizontal_fuse(func)
    with pytest.raises(ValueError, match="consecutive"):
        horizontal_fuse(two, ["spmm_p0b0", "spmm_p0b2"])
    with pytest.raises(ValueError, match="no iteration named"):
        horizontal_fuse(two, ["spmm_p0b0", "nope"])
    m = ir.size_var("m")
    I = ir.dense_fixed("I", m)
    J = ir.sparse_variable("J", I, 4, 8)
    A, y = ir.SparseBuffer("A", (I, J)), ir.SparseBuffer("y", (I,))

    @ir.sparse_iteration([I, J], "RS", name="first")
    def first(i, j):
        y[i] += A[i, j]

    with pytest.raises(ValueError, match="spatial root axis"):
        horizontal_fuse(ir.SparseFunction("f", [first, first.replace(name="second")]))


def test_specialize_binds_sizes_to_constants():
    func, _ = csr_spmm(16)
    prim = specialize(lower(func), {"m": 100, "nnz": 300})
    script = prim.script()
    assert 'A: T.Buffer((300,), "float32"' in script and "J_indptr: T.Buffer((101,)" in script
    assert [p.name for p in prim.params][-1:] == ["n"], "bound sizes leave the signature"
    with pytest.raises(ValueError, match="not size parameters"):
        specialize(lower(func), {"rows": 3})
    with pytest.raises(ValueError, match="must be an int"):
        specialize(lower(func), {"m": -1})
