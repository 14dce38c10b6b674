"""An input dropout inside ops.aggregate_transform: the layer of X * keep / (1 - p) equals torch's
(F.dropout with the same mask, then the layer) in every order, on random and real (cora, sampled
blocks) structures, with empty rows, one row and int64 indices; gradcheck (float64); p = 0 and p
near 1; the mask is read inside the SpMM where it aggregates first (no dropped copy of the
sources); bad p or masks are refused before a kernel runs; the masked kernels build for CUDA and
equal numpy in the emulator."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.data.node_classification import load_node_classification
from sparsetir.nn import NeighborSampler
from sparsetir.ops import aggregate_transform, torch_aggregate
from sparsetir.ops.aggregate_transform import masks_in_kernel


def _structure(rows, cols, density=0.2, seed=3, empty_row=None):
    A = sp.random(rows, cols, density=density, random_state=seed, format="lil")
    if empty_row is not None:
        A[empty_row, :] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    A.data[:] = 1.0
    return A


def _tensors(A, dtype=torch.int64):
    return torch.from_numpy(A.indptr).to(dtype), torch.from_numpy(A.indices).to(dtype)


def _mean_scale(A, dtype):
    return torch.from_numpy(1.0 / np.maximum(np.diff(A.indptr), 1)).to(dtype)


def _keep(shape, p, seed=0):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) >= p


def _reference(A, X, keep, p, W, W_root=None, bias=None, scale=None, values=None):
    """F.dropout's formula with the mask given, then the layer as dense torch."""
    dropped = X * keep / (1.0 - p)
    dense = torch.from_numpy(A.toarray()).to(X.dtype)
    if values is not None:
        dense = torch.sparse_csr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices), values,
                                        size=A.shape).to_dense()
    if scale is not None:
        dense = scale[:, None] * dense
    out = dense @ dropped @ W.T
    if W_root is not None:
        out = out + dropped[:A.shape[0]] @ W_root.T
    return out if bias is None else out + bias


SOURCES = 64
BLOCK = _structure(20, SOURCES, density=0.08, empty_row=4)  # 20 targets lead 64 sources; row 4 has no neighbour
# f_in > f_out projects first (the dropped copy made once); f_in < f_out aggregates first (mask in the SpMM)
ORDERS = pytest.mark.parametrize("f_in, f_out", [(6, 2), (2, 6)], ids=["projects-first", "aggregates-first"])


def _operands(f_in, f_out, rows=SOURCES, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()  # noqa: E731
    return make(rows, f_in), make(f_out, f_in), make(f_out, f_in), make(f_out)


@ORDERS
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_equals_torch_dropout_then_the_layer(f_in, f_out, index_dtype):
    indptr, indices = _tensors(BLOCK, index_dtype)
    X, W, W_root, bias = _operands(f_in, f_out)
    scale, p = _mean_scale(BLOCK, X.dtype), 0.4
    keep = _keep(X.shape, p)
    assert masks_in_kernel(indptr, indices, None, X, W, "csr", keep, True) == (f_in < f_out)
    out = aggregate_transform(indptr, indices, X, W, SOURCES, scale=scale, W_root=W_root, bias=bias, keep=keep, p=p)
    torch.testing.assert_close(out, _reference(BLOCK, X, keep, p, W, W_root, bias, scale=scale))
    total = aggregate_transform(indptr, indices, X, W, SOURCES, keep=keep, p=p)  # a sum: neither scale nor values
    torch.testing.assert_close(total, _reference(BLOCK, X, keep, p, W))


def test_the_mask_goes_in_the_kernel_only_where_it_spares_more_than_it_reads():
    X, W = torch.zeros(40, 2), torch.zeros(6, 2)  # aggregates first
    keep = torch.ones(40, 2, dtype=torch.bool)
    dense, sparse = (_tensors(_structure(40, 40, density=d)) for d in (0.4, 0.05))
    assert not masks_in_kernel(*sparse, None, X, W, "csr", keep, True)  # a graph's root term needs every row
    assert masks_in_kernel(*sparse, None, X, W, "csr", keep, False)  # no root: no row of the copy needed
    assert not masks_in_kernel(*dense, None, X, W, "csr", keep, False)  # 640 gathers read more than 40 rows cost
    assert not masks_in_kernel(*sparse, None, X, W, "hyb", keep, False)
    assert not masks_in_kernel(*sparse, None, X, W, "csr", None, False)
    graph = _structure(40, 40, density=0.05)
    indptr, indices = _tensors(graph)
    X64, W64, W_root, bias = _operands(2, 6, rows=40)
    keep = _keep(X64.shape, 0.5, seed=11)
    out = aggregate_transform(indptr, indices, X64, W64, 40, scale=_mean_scale(graph, X64.dtype), W_root=W_root,
                              bias=bias, keep=keep, p=0.5)
    torch.testing.assert_close(out, _reference(graph, X64, keep, 0.5, W64, W_root, bias,
                                               scale=_mean_scale(graph, X64.dtype)))
    bare = aggregate_transform(indptr, indices, X64, W64, 40, keep=keep, p=0.5)  # no root: the mask in the kernel
    torch.testing.assert_close(bare, _reference(graph, X64, keep, 0.5, W64))


def test_weighted_values_make_the_dropped_copy_and_equal_torch():
    indptr, indices = _tensors(BLOCK)
    X, W, W_root, _ = _operands(2, 6)
    values = torch.rand(BLOCK.nnz, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    keep = _keep(X.shape, 0.3, seed=1)
    assert not masks_in_kernel(indptr, indices, values, X, W, "csr", keep, True)
    out = aggregate_transform(indptr, indices, X, W, SOURCES, values=values, W_root=W_root, keep=keep, p=0.3)
    torch.testing.assert_close(out, _reference(BLOCK, X, keep, 0.3, W, W_root, values=values))


@ORDERS
def test_gradcheck_float64_with_the_mask(f_in, f_out):
    indptr, indices = _tensors(BLOCK)
    X, W, W_root, bias = _operands(f_in, f_out)
    scale, keep = _mean_scale(BLOCK, X.dtype), _keep(X.shape, 0.5, seed=2)
    assert torch.autograd.gradcheck(lambda x, w, r, b: aggregate_transform(
        indptr, indices, x, w, SOURCES, scale=scale, W_root=r, bias=b, keep=keep, p=0.5), (X, W, W_root, bias))
    frozen = W.detach()  # only dX: the backward may take the other order than the forward
    assert torch.autograd.gradcheck(lambda x: aggregate_transform(indptr, indices, x, frozen, SOURCES, scale=scale,
                                                                  W_root=W_root.detach(), keep=keep, p=0.5), (X,))
    values = torch.rand(BLOCK.nnz, dtype=torch.float64, generator=torch.Generator().manual_seed(4)).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, v: aggregate_transform(indptr, indices, x, frozen, SOURCES, values=v,
                                                                     keep=keep, p=0.5), (X, values))


def test_gradients_equal_torch_dropout_in_float32():
    indptr, indices = _tensors(BLOCK)
    X, W, W_root, bias = _operands(16, 32, dtype=torch.float32)
    scale, keep, p = _mean_scale(BLOCK, X.dtype), _keep(X.shape, 0.5, seed=3), 0.5
    out = aggregate_transform(indptr, indices, X, W, SOURCES, scale=scale, W_root=W_root, bias=bias, keep=keep, p=p)
    grad = torch.randn_like(out)
    mine = torch.autograd.grad(out, (X, W, W_root, bias), grad)
    theirs = torch.autograd.grad(_reference(BLOCK, X, keep, p, W, W_root, bias, scale=scale), (X, W, W_root, bias),
                                 grad)
    for name, a, b in zip(("X", "W", "W_root", "bias"), mine, theirs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=name)
    assert (mine[0][~keep] == 0).all()  # a dropped entry gets no gradient


@pytest.mark.parametrize("p", [0.0, 0.995])
def test_p_zero_and_p_near_one(p):
    indptr, indices = _tensors(BLOCK)
    X, W, W_root, bias = _operands(2, 6)
    scale = _mean_scale(BLOCK, X.dtype)
    keep = _keep(X.shape, p, seed=7)
    out = aggregate_transform(indptr, indices, X, W, SOURCES, scale=scale, W_root=W_root, bias=bias, keep=keep, p=p)
    torch.testing.assert_close(out, _reference(BLOCK, X, keep, p, W, W_root, bias, scale=scale))
    if p == 0.0:
        plain = aggregate_transform(indptr, indices, X, W, SOURCES, scale=scale, W_root=W_root, bias=bias)
        torch.testing.assert_close(out, plain)


@pytest.mark.parametrize("shape", [(1, 5), (0, 5)], ids=["one-row", "no-row"])
def test_one_row_and_no_row(shape):
    A = sp.csr_matrix(np.ones(shape)) if shape[0] else sp.csr_matrix(shape)
    indptr, indices = _tensors(A)
    X, W, W_root, _ = _operands(2, 6, rows=5)
    keep = _keep(X.shape, 0.5, seed=8)
    out = aggregate_transform(indptr, indices, X, W, 5, scale=_mean_scale(A, X.dtype), W_root=W_root, keep=keep,
                              p=0.5)
    assert out.shape == (shape[0], 6)
    torch.testing.assert_close(out, _reference(A, X, keep, 0.5, W, W_root, scale=_mean_scale(A, X.dtype)))
    out.sum().backward()
    assert X.grad.shape == X.shape


def test_sampled_blocks_of_cora_with_their_proof():
    adj_t = load_node_classification("cora").adjacency
    batch = NeighborSampler(adj_t, (5, 5), seed=0).sample(np.arange(0, 2708, 11), np.random.default_rng(0))
    for block in batch.blocks:
        A = sp.csr_matrix((np.ones(block.indices.shape[0]), block.indices.numpy(), block.indptr.numpy()),
                          shape=(block.num_rows, block.num_cols))
        X, W, W_root, bias = _operands(16, 32, rows=block.num_cols, dtype=torch.float32)
        keep, scale = _keep(X.shape, 0.5, seed=9), _mean_scale(A, X.dtype)
        assert masks_in_kernel(block.indptr, block.indices, None, X, W, "csr", keep, True)
        out = aggregate_transform(block.indptr, block.indices, X, W, block.num_cols, scale=scale, W_root=W_root,
                                  bias=bias, keep=keep, p=0.5)
        expected = _reference(A, X, keep, 0.5, W, W_root, bias, scale=scale)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
        grad = torch.randn_like(out)
        torch.testing.assert_close(torch.autograd.grad(out, X, grad)[0], torch.autograd.grad(expected, X, grad)[0],
                                   rtol=1e-5, atol=1e-5)


def test_the_masked_products_read_the_mask_in_the_reduction():
    indptr, indices = _tensors(BLOCK)
    B = torch.randn(SOURCES, 8, dtype=torch.float64)
    keep, scale = _keep(B.shape, 0.5, seed=10), torch.rand(20, dtype=torch.float64)
    dense = torch.from_numpy(BLOCK.toarray())
    torch.testing.assert_close(torch_aggregate.masked_row_scaled(indptr, indices, B, keep, scale, SOURCES),
                               scale[:, None] * (dense @ (B * keep)))
    G = torch.randn(20, 8, dtype=torch.float64)
    torch.testing.assert_close(torch_aggregate.masked_column_scaled(indptr, indices, G, keep, scale, SOURCES),
                               keep * (dense.T @ (scale[:, None] * G)))


def test_bad_p_and_masks_are_refused_before_a_kernel_runs():
    indptr, indices = _tensors(BLOCK)
    X, W, _, _ = (t.detach() for t in _operands(2, 6))
    keep = _keep(X.shape, 0.5)
    cases = [
        (dict(keep=keep, p=1.0), ValueError, r"\[0, 1\)"),
        (dict(keep=keep, p=-0.1), ValueError, r"\[0, 1\)"),
        (dict(keep=keep, p=float("nan")), ValueError, r"\[0, 1\)"),
        (dict(p=0.5), ValueError, "keep mask"),
        (dict(keep=keep.double(), p=0.5), TypeError, "bool"),
        (dict(keep=keep[:-1], p=0.5), ValueError, "shape"),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            aggregate_transform(indptr, indices, X, W, SOURCES, **kwargs)


# --- the masked kernels on CUDA (nvcc, emulated) ---------------------------------------------------

def test_the_masked_kernels_build_for_cuda_and_equal_numpy_in_the_emulator():
    from sparsetir.backend import build, scheduled_module
    from sparsetir.backend.cuda import nvcc_available
    from sparsetir.ops.aggregate import masked_column_scaled_function, masked_row_scaled_function

    ok, why = nvcc_available()
    if not ok:
        pytest.skip(f"needs nvcc: {why}")
    from sparsetir.testing.cuda_emulator import emulate_module

    rng = np.random.default_rng(0)
    A = BLOCK
    B = rng.standard_normal((SOURCES, 8)).astype(np.float32)
    M = (rng.random((SOURCES, 8)) >= 0.5).astype(np.uint8)
    S = rng.random(20).astype(np.float32)
    cases = [(masked_row_scaled_function(8), A, {"B": B, "M": M, "S": S}, "C",
              S[:, None] * (A @ (B * M))),
             (masked_column_scaled_function(8), A.T.tocsr(), {"G": B[:20].copy(), "M": M, "S": S}, "D",
              M * (A.T @ (S[:, None] * B[:20])))]
    for func, matrix, inputs, output, expected in cases:
        kernel = build(func, "cuda")
        rows = matrix.shape[0]
        out = np.full((rows, 8), np.nan, np.float32)
        arrays = {"J_indptr": matrix.indptr.astype(np.int32), "J_indices": matrix.indices.astype(np.int32),
                  **inputs, output: out}
        emulate_module(scheduled_module(func, "cuda"), kernel.source, arrays,
                       sizes={"m": rows, "n": matrix.shape[1], "nnz": matrix.nnz})
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
