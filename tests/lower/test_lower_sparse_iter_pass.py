"""lower_sparse_iter (Stage I -> II): position loops, nested blocks, searches, fused axes."""

from __future__ import annotations

import pytest
from stage1_examples import csr_spmm, masked_product, masked_scale_rows

from sparsetir import ir as sp
from sparsetir.formats import CSR
from sparsetir.lower import lower_sparse_iter
from sparsetir.lower.stage2 import FIND, UPPER_BOUND, Block
from sparsetir.ops import sddmm_function


def blocks_of(stage2):
    out, todo = [], [n for n in stage2.body if isinstance(n, Block)]
    while todo:
        block = todo.pop(0)
        out.append(block)
        todo = [c for c in block.body if isinstance(c, Block)] + todo
    return out


def test_spmm_stage2_has_a_nested_block_per_variable_axis():
    func, _ = csr_spmm()
    assert str(lower_sparse_iter(func)) == "\n".join([
        "# Stage II: positions (index dtype int32)",
        "def spmm(A: float32[I, J], B: float32[J_, K], C: float32[I, K], J_indptr: int32[m + 1], "
        "J_indices: int32[nnz]):",
        "    for i in grid(m):",
        "        with block('spmm0', kinds='S', parallel_safe=True):",
        "            for j, k in grid(J_indptr[i + 1] - J_indptr[i], 64):",
        "                with block('spmm1', kinds='RS'):",
        "                    with init(): C[i, k] = T.float32(0.0)",
        "                    C[i, k] += A[i, j] * B[J_indices[J_indptr[i] + j], k]",
    ])


def test_reading_through_a_foreign_sparse_axis_searches_the_row():
    stage2 = lower_sparse_iter(masked_product())
    (outer, inner) = blocks_of(stage2)
    assert outer.searches == []
    (search,) = inner.searches
    assert search.mode == FIND and search.array.name == "JM_indices"
    assert str(search.key) == "JA_indices[JA_indptr[i] + j]"
    assert "if_then_else" in str(inner.body[0].value), "absent coordinates read as 0"


def test_the_search_is_memoised():
    stage2 = lower_sparse_iter(masked_product(reads=3))
    assert sum(len(b.searches) for b in blocks_of(stage2)) == 1


def test_the_search_is_hoisted_out_of_loops_it_does_not_depend_on():
    stage2 = lower_sparse_iter(masked_scale_rows())
    blocks = blocks_of(stage2)
    assert [[loop.var.name for loop in b.loops] for b in blocks] == [["i"], ["j"], ["k"]]
    assert len(blocks[1].searches) == 1 and blocks[2].searches == []


def test_fused_axes_recover_the_row_with_a_search_on_indptr():
    stage2 = lower_sparse_iter(sddmm_function(CSR(), 16))
    blocks = blocks_of(stage2)
    assert [[loop.var.name for loop in b.loops] for b in blocks] == [["ij"], ["k"]]
    assert str(blocks[0].loops[0].extent) == "nnz", "one loop over all non-zeros"
    (search,) = blocks[0].searches
    assert search.mode == UPPER_BOUND and search.array.name == "J_indptr"
    assert blocks[1].init, "C is initialised in the reduction block"


def test_writing_through_a_foreign_sparse_axis_is_refused():
    I = sp.dense_fixed("I", 4)
    JA = sp.sparse_variable("JA", I, 4, 8)
    JM = sp.sparse_variable("JM", I, 4, 8)
    A = sp.SparseBuffer("A", (I, JA))
    M = sp.SparseBuffer("M", (I, JM))

    @sp.sparse_iteration([I, JA], "SS")
    def scatter(i, j):
        M[i, j] = A[i, j]

    with pytest.raises(ValueError, match="written through axis JM"):
        lower_sparse_iter(sp.SparseFunction("scatter", [scatter]))


def test_scatter_into_a_dense_output_is_zero_filled_first():
    """y[j] += A[i, j]: output positions are not the spatial loops, so the output is filled first."""
    m, n, nnz = sp.size_vars("m n nnz")
    I = sp.dense_fixed("I", m)
    J = sp.sparse_variable("J", I, n, nnz)
    J_ = sp.dense_fixed("J_", n)
    A = sp.SparseBuffer("A", (I, J))
    y = sp.SparseBuffer("y", (J_,))

    @sp.sparse_iteration([I, J], "RS")
    def column_sums(i, j):
        y[j] += A[i, j]

    stage2 = lower_sparse_iter(sp.SparseFunction("colsum", [column_sums]))
    assert "y[...] = T.float32(0.0)" in str(stage2)
    assert not any(b.init for b in blocks_of(stage2))


def rows_per_part(*, disjoint: bool):
    """C[r, k] += A[t, r, j] * B[j, k] with the rows of each part listed by R (row-partitioned CSR)."""
    m, n, nnz, parts = sp.size_vars("m n nnz parts")
    I = sp.dense_fixed("I", m)
    T = sp.dense_fixed("T", parts)
    R = sp.sparse_variable("R", T, m, m, distinct=True, disjoint=disjoint)
    J = sp.sparse_variable("J", R, n, nnz)
    J_, K = sp.dense_fixed("J_", n), sp.dense_fixed("K", 16)
    A, B, C = sp.SparseBuffer("A", (T, R, J)), sp.SparseBuffer("B", (J_, K)), sp.SparseBuffer("C", (I, K))

    @sp.sparse_iteration([T, R, J, K], "SSRS", init=0, init_scope="written")
    def spmm(t, r, j, k):
        C[r, k] += A[t, r, j] * B[j, k]

    return sp.SparseFunction("spmm", [spmm], params=[A, B, C])


def test_rows_of_a_distinct_and_disjoint_child_axis_let_the_outer_loop_run_in_parallel():
    """Each row in one part: distinct parts write distinct rows, and each row is initialised in place."""
    stage2 = lower_sparse_iter(rows_per_part(disjoint=True))
    parts, rows, nonzeros = blocks_of(stage2)
    assert parts.parallel_safe
    assert not parts.init and not rows.init and len(nonzeros.init) == 1
    assert "C[...] =" not in str(stage2)  # no fill pass


def test_rows_distinct_only_within_a_part_may_repeat_across_parts():
    """Without ``disjoint`` two parts may list the same row: no parallel proof, and a fill first."""
    stage2 = lower_sparse_iter(rows_per_part(disjoint=False))
    assert not blocks_of(stage2)[0].parallel_safe
    assert not any(b.init for b in blocks_of(stage2))
    assert "C[...] = T.float32(0.0)" in str(stage2)


def test_disjoint_is_a_property_of_child_axes():
    with pytest.raises(ValueError, match="disjoint describes a child axis"):
        sp.sparse_fixed("R", None, 8, 4, distinct=True, disjoint=True)
