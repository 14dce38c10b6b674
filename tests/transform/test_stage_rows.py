"""stage_rows sums each block row into a local tile added onto the output (Stage II structure), the CPU template
runs that tile as a register-blocked micro-kernel (Stage III structure), and what it cannot stage is refused."""

from __future__ import annotations

import pytest

from sparsetir import ir
from sparsetir.backend import scheduled_module
from sparsetir.formats import parse_format
from sparsetir.ir import SparseBuffer, SparseFunction, dense_fixed, sparse_iteration
from sparsetir.lower import lower_sparse_iter
from sparsetir.ops.spmm import spmm_function
from sparsetir.transform import stage_rows

EXPECTED_STAGE2 = """\
    for i_bsr in grid(mb):
        with block('spmm_bsr0', kinds='S', parallel_safe=True, staged_tile, local=C_tile):
            for j_bsr, ii_bsr, ji_bsr, k in grid(J_bsr_indptr[i_bsr + 1] - J_bsr_indptr[i_bsr], 16, 16, 64):
                with block('spmm_bsr1_product', kinds='RSRS'):
                    with init(): C_tile[ii_bsr, k] = T.float32(0.0)
                    C_tile[ii_bsr, k] += A_bsr[i_bsr, j_bsr, ii_bsr, ji_bsr] * T.reinterpret("float32", \
T.reinterpret("uint32", T.if_then_else(J_bsr_indices[J_bsr_indptr[i_bsr] + j_bsr] * 16 + ji_bsr < n, \
B[J_bsr_indices[J_bsr_indptr[i_bsr] + j_bsr] * 16 + ji_bsr, k], T.float32(0.0))) & T.Cast("uint32", \
T.reinterpret("uint32", A_bsr[i_bsr, j_bsr, ii_bsr, ji_bsr]) != T.uint32(2147483648)) * T.uint32(4294967295))
            for ii_bsr, k in grid(16, 64):
                with block('spmm_bsr_rows0_rest', kinds='SS'):
                    if i_bsr * 16 + ii_bsr < m: C[i_bsr * 16 + ii_bsr, k] += C_tile[ii_bsr, k]"""


def blocked(fmt="bsr:16", feat=64):
    return spmm_function(parse_format(fmt), feat, block_kernel=True)


def test_each_block_row_is_summed_in_a_local_tile():  # one block row per tile, the tile allocated in its block
    text = str(lower_sparse_iter(blocked()))
    body = text[text.index("    for i_bsr"):]
    assert body == EXPECTED_STAGE2


def test_the_cpu_template_keeps_a_register_block_of_accumulators():
    script = scheduled_module(blocked(feat=64), "llvm", register_rows=4, register_vectors=2, vector_width=16).script()
    tile = script[script.index('"sparsetir.staged_tile"'):]
    assert 'C_tile_local = T.sblock_alloc_buffer((16, 64), scope="local")' in tile  # compacted to 4 x 32 by TVM
    init, update, rows = (tile.index(name) for name in ('"spmm_bsr1_product_init"', '"spmm_bsr1_product_update"',
                                                        '"spmm_bsr_rows0_rest"'))
    assert init < update < rows
    product = tile[tile.index("for ax0, ax2 in T.grid(J_bsr_indptr[vi_bsr + 1] - J_bsr_indptr[vi_bsr], 16):"):update]
    # the row's blocks and each block's columns outside, the register block's 4 rows and 2 vectors of 16 inside
    assert product.split()[10:22] == ["for", "ax1", "in", "T.unroll(4):", "for", "ax3_0", "in", "T.unroll(2):",
                                      "for", "ax3_1", "in", "T.vectorized(16):"]
    assert "for ii_bsr_0, k_0 in T.grid(4, 2):" in tile
    assert "T.parallel(" in script


def test_refuses_what_it_cannot_stage():
    rows, feats = dense_fixed("R", 8), dense_fixed("F", 4)
    X, Y = SparseBuffer("X", (rows, feats)), SparseBuffer("Y", (feats,))

    @sparse_iteration([feats, rows], "SR", name="colmax")
    def colmax(f, r):
        Y[f] = ir.max(Y[f], X[r, f])

    with pytest.raises(ValueError, match="plain sum"):
        stage_rows(SparseFunction("f", [colmax]))

    @sparse_iteration([rows, feats], "RS", name="outer_reduction")
    def outer_reduction(r, f):
        Y[f] += X[r, f]

    with pytest.raises(ValueError, match="spatial outermost loop"):
        stage_rows(SparseFunction("f", [outer_reduction]))
    with pytest.raises(TypeError, match="SparseFunction"):
        stage_rows("spmm")


def test_a_float32_tile_under_a_half_output_and_no_guard_on_its_block_rows():
    """The tensor-core form (ops.spmm.tensor_core_block_function): the tile sums float32 products and is cast once
    onto C; no padding guard, and B's nb * b rows need no bounds guard (the lowering proves it by the quotient)."""
    from sparsetir.ops.spmm import tensor_core_block_function

    text = str(lower_sparse_iter(tensor_core_block_function(parse_format("bsr:16"), 32, "float16")))
    assert ('C_tile[ii_bsr, k] += T.Cast("float32", A_bsr[i_bsr, j_bsr, ii_bsr, ji_bsr]) * T.Cast("float32", '
            "B[J_bsr_indices[J_bsr_indptr[i_bsr] + j_bsr] * 16 + ji_bsr, k])") in text
    assert 'if i_bsr * 16 + ii_bsr < m: C[i_bsr * 16 + ii_bsr, k] += T.Cast("float16", C_tile[ii_bsr, k])' in text
    assert "if_then_else" not in text and "reinterpret" not in text
