"""torch.ops.sparsetir.rgms: equal to the float64 reference, correct gradients for X, W and the values
(gradcheck, both directions), a fake kernel, kernels compiled once per structure, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sparsetir.ops  # noqa: F401 - registers torch.ops.sparsetir.*
from sparsetir.formats.relational import RelationalMatrix
from sparsetir.ops import torch_ops
from sparsetir.ops.torch_rgms import rgms_kernels
from sparsetir.reference.rgms import rgms_reference


def relations(R=3, m=7, n=5, nnz=30, seed=0):
    """A relation-major stacked CSR with repeated entries, an empty relation and empty rows."""
    rng = np.random.default_rng(seed)
    relation = rng.integers(0, R - 1, nnz)  # relation R - 1 stays empty
    row, col = rng.integers(0, m - 2, nnz), rng.integers(0, n, nnz)
    order = np.lexsort((col, row, relation))
    stacked = (relation * m + row)[order]
    indptr = np.zeros(R * m + 1, np.int64)
    np.cumsum(np.bincount(stacked, minlength=R * m), out=indptr[1:])
    values = rng.random(nnz) + 0.5
    return torch.from_numpy(indptr), torch.from_numpy(col[order].astype(np.int64)), torch.from_numpy(values)


def test_forward_equals_the_reference_both_ways():
    indptr, indices, values = relations()
    X, W = torch.randn(5, 4, dtype=torch.float64), torch.randn(3, 4, 6, dtype=torch.float64)
    matrix = RelationalMatrix((7, 5), 3, indptr.numpy(), indices.numpy(), values.numpy())
    out = torch.ops.sparsetir.rgms(indptr, indices, values, X, W, 5)
    np.testing.assert_allclose(out.numpy(), rgms_reference(matrix, X.numpy(), W.numpy()).reference, atol=1e-12)
    Xt = torch.randn(7, 4, dtype=torch.float64)  # transpose: sum_r A_r^T X W_r
    dense = torch.zeros(3, 7, 5, dtype=torch.float64)
    stacked = torch.repeat_interleave(torch.arange(21), indptr[1:] - indptr[:-1])
    dense.index_put_((stacked // 7, stacked % 7, indices), values, accumulate=True)
    expected = torch.einsum("rij,il,rlk->jk", dense, Xt, W)
    torch.testing.assert_close(torch.ops.sparsetir.rgms(indptr, indices, values, Xt, W, 5, True), expected)


@pytest.mark.parametrize("transpose", [False, True])
def test_gradcheck_x_w_and_values(transpose):
    indptr, indices, values = relations(seed=1)
    X = torch.randn(7 if transpose else 5, 3, dtype=torch.float64, requires_grad=True)
    W = torch.randn(3, 3, 2, dtype=torch.float64, requires_grad=True)
    values = values.clone().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda v, X, W: torch.ops.sparsetir.rgms(indptr, indices, v, X, W, 5, transpose), (values, X, W))


def test_no_entries_gives_zeros_and_zero_gradients():
    indptr, indices = torch.zeros(3 * 4 + 1, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)
    X = torch.randn(6, 2, requires_grad=True)
    W = torch.randn(3, 2, 5, requires_grad=True)
    out = torch.ops.sparsetir.rgms(indptr, indices, torch.zeros(0), X, W, 6)
    assert out.shape == (4, 5) and not out.any()
    out.sum().backward()
    assert not X.grad.any() and not W.grad.any()


def test_kernels_are_compiled_once_per_structure_and_the_fake_kernel_gives_shapes():
    indptr, indices, values = relations(seed=2)
    values = values.float()
    X, W = torch.randn(5, 4), torch.randn(3, 4, 4)
    torch.ops.sparsetir.rgms(indptr, indices, values, X, W, 5)
    before = torch_ops.stats()["kernels"]
    for _ in range(3):
        torch.ops.sparsetir.rgms(indptr, indices, values, X, W, 5)
    assert torch_ops.stats()["kernels"] == before
    assert len(rgms_kernels(indptr, indices, 5)) == 1
    meta = {"device": "meta"}
    out = torch.ops.sparsetir.rgms(torch.empty(22, dtype=torch.int64, **meta), torch.empty(9, dtype=torch.int64, **meta),
                                   torch.empty(9, **meta), torch.empty(5, 4, **meta), torch.empty(3, 4, 2, **meta), 5)
    assert out.shape == (7, 2) and out.device.type == "meta"


@pytest.mark.parametrize("change, error, message", [
    ("indptr", ValueError, "not R\\*m \\+ 1"),
    ("X rows", ValueError, "X has 4 rows, expected 5"),
    ("W shape", ValueError, "must be \\(R, f_in, f_out\\)"),
    ("dtype", TypeError, "X and W must share a dtype"),
    ("index", ValueError, "out of range"),
])
def test_bad_input_is_refused(change, error, message):
    indptr, indices, values = relations(seed=3)
    X, W = torch.randn(5, 4, dtype=torch.float64), torch.randn(3, 4, 2, dtype=torch.float64)
    if change == "indptr":
        indptr = torch.cat([indptr, indptr[-1:]])
    elif change == "X rows":
        X = X[:4]
    elif change == "W shape":
        W = torch.randn(3, 3, 2, dtype=torch.float64)
    elif change == "dtype":
        W = W.float()
    elif change == "index":
        indices = indices.clone()
        indices[0] = 5
    with pytest.raises(error, match=message):
        torch.ops.sparsetir.rgms(indptr, indices, values, X, W, 5)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_the_structure_is_held_once_and_never_shares_the_users_tensors(index_dtype):
    """The validated host copy is the only copy of a large stacked indptr: the content reference is a view of it
    (int32 tensors: the narrowed arrays; int64: the owned int64 copy), and the relational form the gradients
    use is the record's own arrays. None of it is the user's memory, so edits to the user's tensors are seen."""
    from sparsetir.ops.torch_rgms import _DERIVED

    indptr, indices, values = relations(R=4, m=9, n=6, nnz=40, seed=3)
    indptr, indices = indptr.to(index_dtype), indices.to(index_dtype)
    X, W = torch.randn(6, 3, dtype=torch.float64), torch.randn(4, 3, 2, dtype=torch.float64)
    torch.ops.sparsetir.rgms(indptr, indices, values, X, W, 6)
    record = torch_ops._structure(indptr, indices, 6)
    owned = [record.matrix.indptr, record.matrix.indices]
    for reference, user in zip(record.reference, (indptr, indices)):
        assert any(np.shares_memory(reference.numpy(), array) for array in owned) == (index_dtype == torch.int32)
        assert not np.shares_memory(reference.numpy(), user.numpy())
    relational = record.extras[_DERIVED][4]["relational"]
    assert relational.indptr is record.matrix.indptr and relational.indices is record.matrix.indices
    before = torch.ops.sparsetir.rgms(indptr, indices, values, X, W, 6)
    indices[0] = (indices[0] + 1) % 6  # an edit in place: a new structure, validated and used
    after = torch.ops.sparsetir.rgms(indptr, indices, values, X, W, 6)
    matrix = RelationalMatrix((9, 6), 4, indptr.numpy(), indices.numpy(), values.numpy())
    np.testing.assert_allclose(after.numpy(), rgms_reference(matrix, X.numpy(), W.numpy()).reference, atol=1e-12)
    assert not torch.equal(before, after)
