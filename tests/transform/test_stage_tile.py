"""stage_tile runs a consumer inside its producer's tile loops (Stage II structure), the CPU template turns
the tile into a register-blocked product (Stage III structure), and illegal pairs get clear errors."""

from __future__ import annotations

import pytest

from sparsetir.backend import scheduled_module
from sparsetir.formats import parse_format
from sparsetir.lower import lower_sparse_iter
from sparsetir.ops.rgms import rgms_function
from sparsetir.transform import stage_tile

EXPECTED_STAGE2 = """\
    Y[...] = T.float32(0.0)
    for p in grid(4):
        with block('tile0', kinds='S', parallel_safe=True):
            for t in grid(T_indptr[p + 1] - T_indptr[p]):
                with block('tile1', kinds='R', staged_tile, local=Pt):
                    for s, j, l, k in grid(8, 1, 16, 32):
                        with block('tile1_product', kinds='SRRS'):
                            with init(): Pt[s, k] = T.float32(0.0)
                            Pt[s, k] += X[J_indices[(T_indptr[p] + t) * 8 + s + j], l] * W[T_indices[T_indptr[p] + t], l, k]
                    for s, k in grid(8, 32):
                        with block('scatter1_rest', kinds='SS'):
                            Y[S_indices[(T_indptr[p] + t) * 8 + s], k] += A[p, t, s] * T.reinterpret("float32", \
T.reinterpret("uint32", Pt[s, k]) & T.Cast("uint32", T.reinterpret("uint32", A[p, t, s]) != T.uint32(2147483648)) * \
T.uint32(4294967295))"""  # a padding slot (-0.0 in A) adds nothing: rtile is padded (ir.padding)


def staged(rows=8, parts=4, f_in=16, f_out=32):
    return rgms_function(parse_format(f"rtile:{rows}:{parts}"), f_in, f_out)


def test_the_consumer_runs_inside_the_producers_tile_loop():
    text = str(lower_sparse_iter(staged()))
    body = text[text.index("    Y[...]"):]
    assert body == EXPECTED_STAGE2
    assert "Pt = alloc" not in text  # one tile's buffer, allocated in the tile block


def test_the_cpu_template_blocks_the_product_in_registers():
    script = scheduled_module(staged(rows=8, f_in=16, f_out=64), "llvm", register_rows=4, register_vectors=2,
                              vector_width=16).script()
    tile = script[script.index('"sparsetir.staged_tile"'):]
    # per register block: zero 4 x 2 vectors, reduce over c_in with rows and vectors unrolled, lanes vectorised,
    # then add the block onto the output rows
    assert "for s_0, k_0 in T.grid(2, 2):" in tile
    init, update, scatter = (tile.index(name) for name in ('"tile1_product_init"', '"tile1_product_update"',
                                                           '"scatter1_rest"'))
    assert init < update < scatter
    product = tile[tile.index("for ax1 in range(16):"):update]
    assert product.split() [:12] == ["for", "ax1", "in", "range(16):", "for", "ax0", "in", "T.unroll(4):", "for",
                                     "ax2_0", "in", "T.unroll(2):"]
    assert "T.vectorized(16)" in product
    assert "T.parallel(4)" in script


def test_gather_stages_the_input_rows_in_a_local_tile():
    script = scheduled_module(staged(), "llvm", gather=True).script()
    assert 'X_local = T.sblock_alloc_buffer((8, 1, 16), scope="local"' in script
    assert "X_local[vs, vj, vl] = X[J_indices[" in script
    assert "Pt_local[vs, vk] + X_local[vs, vj, vl] * W[" in script


def test_refuses_pairs_that_cannot_share_a_tile():
    func = staged()
    with pytest.raises(ValueError, match="right after"):
        stage_tile(func, "scatter", "tile", depth=2)
    with pytest.raises(ValueError, match="no iteration"):
        stage_tile(func, "tile", "nope", depth=2)
    with pytest.raises(ValueError, match="depth"):
        stage_tile(func, "tile", "scatter", depth=0)
    with pytest.raises(TypeError, match="SparseFunction"):
        stage_tile("rgms", "tile", "scatter", depth=2)
