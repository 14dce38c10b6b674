"""NaN and Inf follow the torch op users compare with (docs/nan-semantics.md, issue 27 item 2): a
non-finite input reaches exactly the outputs that depend on it, in the kernels and in the float64
references. Attention against torch SDPA, SpMM against torch.sparse.mm, SDDMM against
torch.sparse.sampled_addmm, sparse convolution and RGMS against their float64 references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir import compile_spmm, ops
from sparsetir.formats.relational import read_relational_input
from sparsetir.reference.conv import conv_reference
from sparsetir.reference.rgms import rgms_reference
from sparsetir.reference.sparse_attention import attention_reference, dense_mask


def same_non_finite(got, expected, *, atol=1e-4):
    """NaN where expected is NaN, +-inf where it is, and close elsewhere."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), (np.isnan(got).sum(), np.isnan(expected).sum())
    assert np.array_equal(np.isposinf(got), np.isposinf(expected))
    assert np.array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], atol=atol, rtol=1e-4)


# ------------------------------------------------------------------------------------------ attention
def sdpa(q, k, v, layout, block):
    mask = torch.from_numpy(dense_mask(layout, block, q.shape[2], k.shape[2]))
    return torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(x).double() for x in (q, k, v)), attn_mask=mask).numpy()


ATTENTION_POISON = {  # operand, (row, column), value
    "nan in q": ("q", (3, 2), np.nan),
    "nan in k": ("k", (20, 0), np.nan),
    "inf in k": ("k", (5, 1), np.inf),
    "-inf in k": ("k", (5, 1), -np.inf),
    "nan in v": ("v", (17, 4), np.nan),
    "inf in q": ("q", (30, 7), np.inf),
}


def dependent_rows(layout, block, operand, row, q_len, k_len):
    """The query rows whose output depends on ``operand``'s row ``row``: itself for q, those that attend
    to that key for k and v."""
    mask = dense_mask(layout, block, q_len, k_len)
    if operand == "q":
        return np.arange(q_len) == row
    return mask[:, row]


@pytest.mark.parametrize("fmt", ["bsr", "csr"])
@pytest.mark.parametrize("fuse_rows", [False, True])
@pytest.mark.parametrize("poison", sorted(ATTENTION_POISON))
def test_attention_propagates_nan_and_inf_to_exactly_the_rows_that_depend_on_it_as_sdpa(poison, fmt, fuse_rows):
    """The rows that read the poison are SDPA's; every other row is SDPA's on clean inputs (SDPA's dense
    mask would spread a NaN in a masked-out key to every row: NaN + -inf is NaN)."""
    rng = np.random.default_rng(7)
    layout = np.array([[True, False], [True, True]])  # key block 1 only reaches query block 1
    clean = [rng.standard_normal((1, 1, 32, 8)).astype(np.float32) for _ in range(3)]
    q, k, v = (x.copy() for x in clean)
    operand, (row, col), value = ATTENTION_POISON[poison]
    {"q": q, "k": k, "v": v}[operand][0, 0, row, col] = value
    depends = dependent_rows(layout, 16, operand, row, 32, 32)[None, None, :, None]
    expected = np.where(depends, sdpa(q, k, v, layout, 16), sdpa(*clean, layout, 16))
    assert np.isnan(expected).any()  # every poison here reaches some row
    out = ops.sparse_attention(q, k, v, layout, block=16, format=fmt, fuse_rows=fuse_rows)
    same_non_finite(out, expected)
    same_non_finite(attention_reference(q, k, v, layout, 16), expected, atol=1e-10)


def test_a_query_row_with_no_key_stays_zero_and_its_neighbours_finite():
    rng = np.random.default_rng(8)
    layout = np.array([[False, False], [True, True]])
    q, k, v = (rng.standard_normal((1, 1, 32, 8)).astype(np.float32) for _ in range(3))
    out = ops.sparse_attention(q, k, v, layout, block=16)
    assert (out[0, 0, :16] == 0).all() and np.isfinite(out).all()
    assert (attention_reference(q, k, v, layout, 16)[0, 0, :16] == 0).all()


# ------------------------------------------------------------------------------------------ spmm, sddmm
def _matrix(seed=3):
    A = sp.random(40, 30, density=0.15, format="csr", dtype=np.float32, random_state=seed)
    A.data[:] = np.random.default_rng(seed).standard_normal(A.nnz).astype(np.float32)
    A.data[0] = 0.0  # an explicit zero: 0 * nan is nan in torch.sparse.mm too
    return A


def _torch_csr(A, values=None):
    return torch.sparse_csr_tensor(torch.from_numpy(A.indptr).long(), torch.from_numpy(A.indices).long(),
                                   torch.from_numpy(A.data if values is None else values), A.shape)


def test_spmm_in_csr_propagates_nan_and_inf_as_torch_sparse_mm():
    A = _matrix()
    B = np.random.default_rng(1).standard_normal((30, 8)).astype(np.float32)
    B[A.indices[0], 1] = np.nan  # read by the explicit zero
    B[5, :] = np.inf
    B[9, 3] = -np.inf
    expected = torch.sparse.mm(_torch_csr(A), torch.from_numpy(B)).numpy()
    same_non_finite(ops.spmm(A, B), expected)
    same_non_finite(A.astype(np.float64) @ B.astype(np.float64), expected)  # the float64 reference's product


def test_spmm_nan_in_the_values_reaches_only_its_row():
    A = _matrix()
    A.data[7] = np.nan
    B = np.random.default_rng(2).standard_normal((30, 4)).astype(np.float32)
    expected = torch.sparse.mm(_torch_csr(A), torch.from_numpy(B)).numpy()
    same_non_finite(ops.spmm(A, B), expected)


@pytest.mark.parametrize("fmt", ["ell", "ell:2", "bsr:4", "dbsr:4", "srbcrs:4:4", "hyb", "hyb:2:1,2,4"])
def test_spmm_in_a_padded_format_propagates_exactly_as_torch_sparse_mm(fmt):
    # a padding slot (value 0) points at a real row of B (ELL: column 0; a block: each of its columns), so
    # multiplying it gave NaN/Inf in rows that do not store that column; padding holds -0.0 and is skipped
    A = _matrix()
    A.data[3] = -0.0  # a stored -0.0 is an entry, not padding: 0 * nan is nan there
    B = np.random.default_rng(1).standard_normal((30, 8)).astype(np.float32)
    B[0, :] = np.nan
    B[4, 2], B[A.indices[3], 1] = np.inf, np.nan
    expected = torch.sparse.mm(_torch_csr(A), torch.from_numpy(B)).numpy()
    same_non_finite(ops.spmm(A, B, format=fmt), expected)
    kernel = compile_spmm(A, 8, format=fmt)  # new values at run time keep the padding apart too
    values = A.data[::-1].copy()
    values[5] = -0.0
    same_non_finite(kernel(B, values=values), torch.sparse.mm(_torch_csr(A, values), torch.from_numpy(B)).numpy())


@pytest.mark.parametrize("fmt", ["csr", "bsr:4", "ell"])
def test_sddmm_propagates_nan_and_inf_as_sampled_addmm(fmt):
    A = _matrix()
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((40, 8)).astype(np.float32), rng.standard_normal((30, 8)).astype(np.float32)
    X[2, 3], Y[7, 0], Y[11, 2] = np.nan, np.inf, -np.inf
    pattern = _torch_csr(A, np.ones(A.nnz, np.float32))
    expected = torch.sparse.sampled_addmm(pattern, torch.from_numpy(X), torch.from_numpy(Y).T, beta=0.0)
    expected = expected.values().numpy() * A.data
    same_non_finite(ops.sddmm(A, X, Y, format=fmt).data, expected)


# ------------------------------------------------------------------------------------------ conv, rgms
def test_sparse_conv_propagates_a_nan_feature_to_exactly_the_outputs_it_feeds():
    rng = np.random.default_rng(5)
    coords = np.unique(rng.integers(0, 6, (60, 4)) * np.array([0, 1, 1, 1]), axis=0)
    kmap = ops.kernel_map(coords, kernel_size=3)
    features = rng.standard_normal((coords.shape[0], 4)).astype(np.float32)
    features[3, 1], features[10, 0] = np.nan, np.inf
    weight = rng.standard_normal((27, 4, 5)).astype(np.float32)
    expected = conv_reference(kmap, features, weight).reference
    assert np.isnan(expected).any()
    same_non_finite(ops.sparse_conv3d(features, kmap, weight), expected)


@pytest.mark.parametrize("fmt", ["relcsr", "csf", "ell3d", "rtile"])
def test_rgms_propagates_nan_and_inf_to_exactly_the_rows_that_read_them(fmt):
    # ell3d's and rtile's padding slots point at a real column (ell3d: column 0, which X[0] = inf makes
    # non-finite): they hold -0.0 and the op skips them, or 0 * inf would reach rows that do not read X[0]
    rng = np.random.default_rng(6)
    adj = [sp.random(30, 30, density=0.1, format="csr", dtype=np.float32, random_state=s) for s in range(3)]
    X = rng.standard_normal((30, 4)).astype(np.float32)
    X[2, 1], X[0, :] = np.nan, np.inf
    W = rng.standard_normal((3, 4, 5)).astype(np.float32)
    expected = rgms_reference(read_relational_input(adj), X, W).reference
    assert np.isnan(expected).any()
    same_non_finite(ops.rgms(adj, X, W, format=fmt), expected)


@pytest.mark.parametrize("fmt", ["relcsr", "csf"])
@pytest.mark.parametrize("dataflow", ["edge", "aggregate", "transform"])
def test_rgms_nan_in_w_r_reaches_only_the_rows_with_an_edge_of_relation_r(fmt, dataflow):
    # relcsr's aggregate dataflow multiplied every (relation, row) pair's H by W_r, an empty pair's 0 too, so a NaN
    # in W_r reached every row (make fuzz, seed 0, cases 593 and 1144)
    rng = np.random.default_rng(7)
    adj = [sp.random(30, 30, density=0.05, format="csr", dtype=np.float32, random_state=s) for s in range(2)]
    adj.append(sp.csr_matrix((30, 30), dtype=np.float32))  # a relation with no edge at all
    X = rng.standard_normal((30, 4)).astype(np.float32)
    W = rng.standard_normal((3, 4, 5)).astype(np.float32)
    W[0, 1, 2], W[2, 0, :] = np.nan, np.nan
    expected = rgms_reference(read_relational_input(adj), X, W).reference
    rows = np.diff(adj[0].indptr) > 0
    assert 0 < rows.sum() < 30 and np.array_equal(np.isnan(expected).any(axis=1), rows)
    same_non_finite(ops.rgms(adj, X, W, format=fmt, dataflow=dataflow), expected)


@pytest.mark.parametrize("dataflow", ["edge", "aggregate", "transform"])
def test_rgms_an_infinite_w_r_makes_the_same_rows_non_finite_in_every_dataflow(dataflow):
    # the order of the sums is the dataflow's, so inf - inf may be NaN in one and inf in another
    # (docs/nan-semantics.md); which outputs are non-finite is the same
    rng = np.random.default_rng(8)
    adj = [sp.random(30, 30, density=0.1, format="csr", dtype=np.float32, random_state=s + 10) for s in range(2)]
    X = rng.standard_normal((30, 4)).astype(np.float32)
    W = rng.standard_normal((2, 4, 3)).astype(np.float32)
    W[1, 2, 0] = np.inf
    expected = rgms_reference(read_relational_input(adj), X, W).reference
    got = ops.rgms(adj, X, W, format="relcsr", dataflow=dataflow)
    assert np.array_equal(np.isfinite(got), np.isfinite(expected))
    assert not np.isfinite(expected[:, 0]).all() and np.isfinite(expected[:, 1:]).all()
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_max_min_aggregation_keeps_a_nan_as_torch_amax(reduce):
    """A plain compare-and-select max drops a NaN (nan > x is false): a NaN in B[j, k] must still reach
    C[i, k] of every row i with an entry j, as scatter_reduce's amax/amin (make fuzz seed 0, case 13)."""
    from sparsetir.ops.torch_aggregate import spmm_reduce

    rng = np.random.default_rng(0)
    A = sp.random(9, 7, density=0.4, format="csr", random_state=1)
    A.indices = A.indices.astype(np.int64)
    B = torch.from_numpy(rng.standard_normal((7, 5)).astype(np.float32))
    B[3, 1] = float("nan")
    B[5, 4] = float("inf") if reduce == "max" else -float("inf")
    got = spmm_reduce(torch.from_numpy(A.indptr.astype(np.int64)), torch.from_numpy(A.indices), B, 7, reduce)
    rows = torch.from_numpy(np.repeat(np.arange(9), np.diff(A.indptr)))
    index = rows[:, None].expand(-1, 5)
    expected = torch.zeros(9, 5).scatter_reduce(0, index, B[torch.from_numpy(A.indices)], "a" + reduce,
                                                include_self=False)
    assert torch.equal(torch.isnan(got), torch.isnan(expected)) and torch.isnan(got).any()
    torch.testing.assert_close(got.nan_to_num(), expected.nan_to_num())



@pytest.mark.parametrize("reduce", ["max", "min"])
def test_max_min_aggregation_keeps_a_nan_first_or_last_in_the_row(reduce):
    """The float reduction itself propagates NaN (lower_sparse_buffer.combine): a NaN met first must
    survive a later more extreme value, and one met last must replace the running extreme."""
    from sparsetir.ops.torch_aggregate import spmm_reduce

    big = 5.0 if reduce == "max" else -5.0
    B = torch.tensor([[float("nan"), big, 1.0], [big, float("nan"), 2.0]])
    indptr, indices = torch.tensor([0, 2, 3]), torch.tensor([0, 1, 1])
    got = spmm_reduce(indptr, indices, B, 2, reduce)
    assert torch.isnan(got[0, :2]).all() and got[0, 2] == (2.0 if reduce == "max" else 1.0)
    assert torch.isnan(got[1, 1]) and got[1, 0] == big and got[1, 2] == 2.0
