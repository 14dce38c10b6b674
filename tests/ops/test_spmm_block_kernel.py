"""Block formats' SpMM through the register-blocked micro-kernel (``block_kernel=True``: each block row summed
in a local tile, ``transform.stage_rows`` + the staged schedule) equals the float64 reference: block-pruned and
DLMC weights, awkward hypothesis matrices (empty block rows, one block, shapes the block does not divide,
features 1, 3, 17), int64 indices, every register-block knob; bad requests are refused before any kernel runs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sparse_cases import csr_matrices
from test_spmm_reference import CANCELLING

from sparsetir.formats import parse_format
from sparsetir.ops import compile_spmm
from sparsetir.reference.spmm import spmm_reference

BLOCK_FORMATS = ["bsr:4", "bsr:16", "dbsr:8", "srbcrs:4:8"]


def weights(pattern: sp.csr_matrix, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    A = sp.csr_matrix(pattern, dtype=np.float32)
    A.data = rng.standard_normal(A.nnz).astype(np.float32)
    return A


def check(A: sp.csr_matrix, feat: int, fmt: str, dtype=np.float32, seed: int = 1, block_kernel: bool = True, **knobs):
    B = np.random.default_rng(seed).standard_normal((A.shape[1], feat)).astype(dtype)
    case = spmm_reference(A, B)
    kernel = compile_spmm(A.astype(dtype), feat, format=fmt, dtype=np.dtype(dtype).name, block_kernel=block_kernel,
                          **knobs)
    got = np.asarray(kernel(B), dtype=np.float64)
    excess = np.abs(got - case.reference) - case.tolerance
    assert (excess <= 0).all(), f"worst excess {excess.max():.3g}"
    return kernel


def test_block_pruned_weights():
    from sparsetir.data.masks import block_pruned

    A = weights(block_pruned(512, 256, 32, 0.85, seed=2))
    check(A, 64, "bsr:32")
    check(A, 48, "bsr:16", register_rows=8, register_vectors=1)


def test_dlmc_weights(real_data):
    from sparsetir.data.masks import dlmc

    real_data("dlmc/transformer/magnitude/0.9/ffn_conv1")
    A = weights(dlmc("transformer/magnitude/0.9/ffn_conv1"))
    check(A, 32, "bsr:16")
    check(A, 32, "srbcrs:8:16")


@pytest.mark.parametrize(("fmt", "feat"), [("bsr:4", 1), ("bsr:16", 17), ("dbsr:8", 3), ("srbcrs:4:8", 17),
                                           ("bsr:8", 64)])
def test_features_not_a_multiple_of_the_vector(fmt, feat):
    A = weights(sp.random(45, 38, density=0.2, format="csr", random_state=feat))  # 45, 38: padded blocks
    check(A, feat, fmt)


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
def test_empty_block_rows_and_a_single_block(fmt):
    empty = sp.random(64, 40, density=0.3, format="csr", random_state=3).tolil()
    empty[8:40] = 0  # whole block rows without a block
    check(weights(empty.tocsr()), 20, fmt)
    check(sp.csr_matrix((np.ones(1, np.float32), ([5], [7])), shape=(9, 11)), 20, fmt)  # one block
    kernel = check(sp.csr_matrix((6, 6), dtype=np.float32), 20, fmt)  # nothing at all
    assert not kernel(np.ones((6, 20), np.float32)).any()


@pytest.mark.parametrize("knobs", [{"register_rows": 2, "register_vectors": 2}, {"cin_split": 4},
                                   {"vector_width": 4}, {"index_dtype": "int64"}])
def test_every_register_block_knob_and_int64_indices(knobs):
    check(weights(sp.random(70, 64, density=0.15, format="csr", random_state=4)), 32, "bsr:8", **knobs)


def test_float64():
    check(weights(sp.random(40, 40, density=0.2, format="csr", random_state=5)), 24, "bsr:8", dtype=np.float64)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=csr_matrices(max_dim=20), fmt=st.sampled_from(BLOCK_FORMATS), feat=st.sampled_from([1, 3, 17]))
@example(A=CANCELLING, fmt="bsr:4", feat=1)  # duplicates that cancel (test_spmm_reference)
def test_awkward_matrices(A, fmt, feat):
    check(sp.csr_matrix(A, dtype=np.float32), feat, fmt)


def test_refused_before_any_kernel_runs():
    A = weights(sp.random(16, 16, density=0.3, format="csr", random_state=6))
    with pytest.raises(ValueError, match="block format"):
        compile_spmm(A, 8, format="csr", block_kernel=True)
    with pytest.raises(ValueError, match="float32 and float64"):
        compile_spmm(A, 8, format="bsr:4", dtype="float16", block_kernel=True)
    with pytest.raises(ValueError, match="block_kernel"):
        compile_spmm(A, 8, format="bsr:4", block_kernel=1)
    with pytest.raises(ValueError, match="on CUDA runs on tensor cores, which take float16 or bfloat16"):
        compile_spmm(A, 8, format="bsr:4", target="cuda", block_kernel=True)  # float32 (tests/cuda: half)


@pytest.mark.parametrize("block_kernel", [False, True])
def test_full_blocks_run_without_the_padding_guard_and_keep_the_nan_rule(block_kernel):
    """padding_guard=None: a block format whose stored blocks have no padding slot inside A's shape (block-pruned
    weights; a dense 20x18 in bsr:16, whose padding lies past the shape) drops the guard, and a NaN of B still
    reaches exactly the rows that store its column; a block with a hole keeps the guard."""
    from sparsetir.ops.spmm import spmm_function

    full = sp.csr_matrix(np.random.default_rng(7).standard_normal((20, 18)).astype(np.float32))
    kernel = check(full, 8, "bsr:16", block_kernel=block_kernel)
    B = np.ones((18, 8), np.float32)
    B[17, 3] = np.nan
    C = kernel(B)
    assert np.isnan(C[:, 3]).all() and np.isfinite(np.delete(C, 3, axis=1)).all()
    holed = full.tolil()
    holed[:16, 17] = 0  # column 17 stored only by rows 16..19 now: the block (0, 1) has padding inside the shape
    holed = weights(holed.tocsr(), seed=3)
    C = check(holed, 8, "bsr:16", block_kernel=block_kernel)(B)
    assert np.isfinite(C[:16]).all() and np.isnan(C[16:, 3]).all()
    assert "reinterpret" not in str(spmm_function(parse_format("bsr:16"), 8, block_kernel=block_kernel,
                                                  padding_guard=False).iterations[-1].stores[0].value)


def test_the_guard_is_resolved_per_matrix():
    from sparsetir.data.masks import block_pruned

    parse = parse_format
    pruned = parse("bsr:16").convert(block_pruned(64, 48, 16, 0.5, seed=1))
    assert not pruned.padding_inside_shape()
    assert parse("bsr:16").convert(sp.random(40, 40, density=0.2, format="csr", random_state=1)).padding_inside_shape()
    assert not parse("dbsr:8").convert(sp.csr_matrix(np.ones((12, 5), np.float32))).padding_inside_shape()
    with pytest.raises(ValueError, match="padding_guard"):
        compile_spmm(sp.eye(8, format="csr", dtype=np.float32), 4, format="csr", padding_guard=False)


def test_the_cost_rule_decides_by_block_features_dtype_guard_and_device():
    """block_kernel=None (the untuned default): the micro-kernel only on CPU, float32, bsr/dbsr blocks of at
    least BLOCK_KERNEL_MIN_BLOCK, at most BLOCK_KERNEL_MAX_FEAT features, no padding guard."""
    from sparsetir.ops.spmm import BLOCK_KERNEL_MAX_FEAT, BLOCK_KERNEL_MIN_BLOCK, choose_block_kernel

    def rule(fmt, feat=BLOCK_KERNEL_MAX_FEAT, device="cpu", dtype="float32", guard=False):
        return choose_block_kernel(parse_format(fmt), feat, device, dtype, guard)

    assert rule("bsr:32") and rule("bsr:16", 1) and rule(f"dbsr:{BLOCK_KERNEL_MIN_BLOCK}") and rule("bsr:64", 32)
    assert not rule("bsr:32", BLOCK_KERNEL_MAX_FEAT + 1) and not rule("bsr:16", 256)  # wide B: the bsr schedule
    assert not rule(f"bsr:{BLOCK_KERNEL_MIN_BLOCK // 2}")  # small blocks
    assert not rule("bsr:32", guard=True)  # a block with a hole: the guard's mask costs the micro-kernel
    assert not rule("bsr:32", dtype="float64") and not rule("srbcrs:4:32") and not rule("csr")
    assert not rule("bsr:32", device="cuda", dtype="float16")  # tensor cores only when asked for


def test_the_untuned_call_follows_the_rule_and_equals_the_reference():
    from sparsetir.data.masks import block_pruned

    A = weights(block_pruned(96, 64, 16, 0.5, seed=4))
    for feat, on in ((32, True), (80, False)):
        untuned = check(A, feat, "bsr:16", block_kernel=None)
        assert untuned.function is check(A, feat, "bsr:16", block_kernel=on).function
    holed = A.copy()
    holed.data[0] = 0
    holed.eliminate_zeros()  # a hole in a stored block: the padding guard stays, so the bsr schedule
    holed = weights(holed, seed=5)
    assert parse_format("bsr:16").convert(holed).padding_inside_shape()
    assert check(holed, 32, "bsr:16", block_kernel=None).function is check(holed, 32, "bsr:16",
                                                                            block_kernel=False).function
