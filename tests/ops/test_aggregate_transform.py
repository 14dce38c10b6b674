"""ops.aggregate_transform: Â X W^T (+ root, + bias) equals the dense product in both orders, passes
gradcheck (float64) in both orders and both backward orders, and refuses bad operands before a kernel runs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.ops import aggregate_transform
from sparsetir.ops.aggregate_transform import backward_aggregates, projects_first

ROWS, COLS = 20, 32  # a block: the 20 targets lead the 32 sources
A = sp.random(ROWS, COLS, density=0.15, random_state=3, format="lil")
A[4, :] = 0  # an empty row: its mean is 0
A = A.tocsr()
A.eliminate_zeros()
A.data[:] = 1.0
INDPTR, INDICES = torch.from_numpy(A.indptr.astype(np.int64)), torch.from_numpy(A.indices.astype(np.int64))
DENSE = torch.from_numpy(A.toarray())
SCALE = torch.from_numpy(1.0 / np.maximum(np.diff(A.indptr), 1))


def _operands(f_in, f_out, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()  # noqa: E731
    return make(COLS, f_in), make(f_out, f_in), make(f_out, f_in), make(f_out)


# f_in > f_out projects first; f_in < f_out aggregates first (a 20 x 32 block: see projects_first)
ORDERS = pytest.mark.parametrize("f_in, f_out", [(6, 2), (2, 6)], ids=["projects-first", "aggregates-first"])


def test_the_order_is_the_cheaper_one():
    assert projects_first(COLS, ROWS, A.nnz, 6, 2) and not projects_first(COLS, ROWS, A.nnz, 2, 6)
    # the backward counts what it needs: with all gradients it follows the forward's order ...
    assert backward_aggregates(1000, 1000, 10_000, 16, 64, kept=True)
    assert not backward_aggregates(1000, 1000, 10_000, 64, 16, kept=False)
    # ... but dW alone (frozen inputs: a first layer) comes from a kept H in one GEMM
    assert backward_aggregates(1000, 1000, 10_000, 64, 16, kept=True, need_x=False)
    assert not backward_aggregates(1000, 1000, 10_000, 64, 16, kept=False, need_x=False)


@ORDERS
def test_equals_the_dense_product_with_the_mean_root_and_bias(f_in, f_out):
    X, W, W_root, bias = _operands(f_in, f_out)
    out = aggregate_transform(INDPTR, INDICES, X, W, COLS, scale=SCALE, W_root=W_root, bias=bias)
    expected = (SCALE[:, None] * DENSE) @ X @ W.T + X[:ROWS] @ W_root.T + bias
    torch.testing.assert_close(out, expected)
    _, kept = torch.ops.sparsetir.aggregate_transform(INDPTR, INDICES, None, SCALE, X, W, None, None, COLS, "csr")
    assert kept.shape[0] == (0 if f_in > f_out else ROWS)  # H kept only where it aggregated first


@ORDERS
def test_gradcheck_float64_mean_root_bias(f_in, f_out):
    X, W, W_root, bias = _operands(f_in, f_out)
    assert torch.autograd.gradcheck(lambda *args: aggregate_transform(INDPTR, INDICES, args[0], args[1], COLS,
                                    scale=SCALE, W_root=args[2], bias=args[3]), (X, W, W_root, bias))


@ORDERS
def test_gradcheck_float64_weighted_values_and_frozen_weight(f_in, f_out):
    X, W, _, _ = _operands(f_in, f_out, seed=1)
    values = torch.rand(A.nnz, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w, v: aggregate_transform(INDPTR, INDICES, x, w, COLS, values=v),
                                    (X, W, values))
    frozen = W.detach()  # only dX: the backward may take the other order
    assert torch.autograd.gradcheck(lambda x: aggregate_transform(INDPTR, INDICES, x, frozen, COLS, scale=SCALE), (X,))


def test_bad_operands_are_refused():
    X, W, W_root, bias = (t.detach() for t in _operands(6, 2))
    cases = [
        (dict(X=X[:-1]), ValueError, "X has 31 rows"),
        (dict(W=W[:, :-1]), ValueError, "W must be"),
        (dict(W_root=W_root.T.contiguous()), ValueError, "W_root must be"),
        (dict(bias=bias[:-1]), ValueError, "bias must be"),
        (dict(W=W.float()), TypeError, "W has dtype"),
        (dict(scale=SCALE[:-1]), ValueError, "scale must be"),
        (dict(values=torch.ones(A.nnz, dtype=torch.float64)), ValueError, "not both"),
    ]
    for change, error, message in cases:
        args = dict(X=X, W=W, W_root=W_root, bias=bias, scale=SCALE) | change
        with pytest.raises(error, match=message):
            aggregate_transform(INDPTR, INDICES, args.pop("X"), args.pop("W"), COLS, **args)
    with pytest.raises(ValueError, match="indices"):
        aggregate_transform(INDPTR, INDICES + 100, X, W, COLS)
    with pytest.raises(RuntimeError, match="row scale"):
        aggregate_transform(INDPTR, INDICES, X, W, COLS, scale=SCALE.clone().requires_grad_()).sum().backward()
