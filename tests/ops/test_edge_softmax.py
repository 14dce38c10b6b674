"""sparsetir.ops.edge_softmax_aggregate (GAT's attention, fused) equals a torch reference that
materialises every edge's message, forward and gradients, with empty rows, repeated entries,
dropout masks and several heads; gradcheck in float64; its CUDA kernels build with nvcc and
compute the same on the emulator; bad operands are clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sparsetir.backend import build, scheduled_module
from sparsetir.backend.cuda import nvcc_available
from sparsetir.ops import edge_softmax_aggregate
from sparsetir.ops.edge_softmax import edge_aggregate_function, edge_softmax_backward_function, edge_softmax_function


def structure(m=14, n=11, seed=0):
    """CSR with empty rows (first, middle), a long row, and a repeated entry."""
    g = torch.Generator().manual_seed(seed)
    degree = torch.randint(0, 5, (m,), generator=g)
    degree[[0, m // 2]] = 0
    degree[3] = 3 * n
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), degree.cumsum(0)])
    indices = torch.randint(0, n, (int(degree.sum()),), generator=g)
    indices[int(indptr[1]) + 1] = indices[int(indptr[1])]
    return indptr, indices


def reference(indptr, indices, x, a_src, a_dst, slope, mask=None):
    """The same with torch ops: per-edge scores, a scatter softmax and the (E, H, F) messages."""
    m = indptr.numel() - 1
    rows = torch.repeat_interleave(torch.arange(m), indptr.diff())
    z = torch.nn.functional.leaky_relu(a_src[indices] + a_dst[rows], slope)
    top = torch.full((m, z.shape[1]), -torch.inf, dtype=z.dtype).scatter_reduce(0, rows[:, None].expand_as(z), z,
                                                                                "amax")
    e = (z - top[rows]).exp()
    alpha = e / torch.zeros(m, z.shape[1], dtype=z.dtype).index_add(0, rows, e)[rows]
    weights = alpha if mask is None else alpha * mask
    out = torch.zeros(m, *x.shape[1:], dtype=x.dtype).index_add(0, rows, weights[:, :, None] * x[indices])
    return out, alpha


def operands(indptr, heads, feat, dtype=torch.float32, seed=1):
    g = torch.Generator().manual_seed(seed)
    n, m = int(indptr.numel() and 11), indptr.numel() - 1
    return (torch.randn(n, heads, feat, generator=g, dtype=dtype), torch.randn(n, heads, generator=g, dtype=dtype),
            torch.randn(m, heads, generator=g, dtype=dtype))


@pytest.mark.parametrize("heads,feat", [(1, 4), (3, 8)])
@pytest.mark.parametrize("dropout", [False, True])
def test_equals_the_materialising_reference_forward_and_gradients(heads, feat, dropout):
    indptr, indices = structure()
    x, a_src, a_dst = (t.requires_grad_() for t in operands(indptr, heads, feat))
    mask = (torch.rand(indices.numel(), heads, generator=torch.Generator().manual_seed(2)) > 0.4).float() / 0.6 \
        if dropout else None
    out, alpha = edge_softmax_aggregate(indptr, indices, x, a_src, a_dst, negative_slope=0.1, mask=mask)
    expected, expected_alpha = reference(indptr, indices, x, a_src, a_dst, 0.1, mask)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(alpha, expected_alpha, rtol=1e-5, atol=1e-6)
    assert not out[0].any() and not out[7].any()  # rows without entries give zeros
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (x, a_src, a_dst), grad)
    theirs = torch.autograd.grad(expected, (x, a_src, a_dst), grad)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_gradcheck_float64_with_a_mask():
    indptr, indices = structure(m=8, n=6, seed=3)
    x, a_src, a_dst = (t.requires_grad_() for t in operands(indptr, 2, 3, torch.float64))
    x = x[:6].detach().requires_grad_()
    a_src = a_src[:6].detach().requires_grad_()
    mask = torch.rand(indices.numel(), 2, dtype=torch.float64) * 2

    def attention(x, a_src, a_dst):
        return edge_softmax_aggregate(indptr, indices, x, a_src, a_dst, negative_slope=0.3, mask=mask)[0]

    assert torch.autograd.gradcheck(attention, (x, a_src, a_dst))


def test_no_entries_at_all():
    indptr, indices = torch.zeros(5, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)
    x = torch.randn(3, 2, 4, requires_grad=True)
    out, alpha = edge_softmax_aggregate(indptr, indices, x, torch.randn(3, 2), torch.randn(4, 2))
    assert out.shape == (4, 2, 4) and not out.any() and alpha.shape == (0, 2)
    out.sum().backward()
    assert not x.grad.any()


def test_bad_operands_are_clear_errors():
    indptr, indices = structure()
    x, a_src, a_dst = operands(indptr, 2, 4)
    with pytest.raises(ValueError, match=r"a_dst must be \(14, 2\)"):
        edge_softmax_aggregate(indptr, indices, x, a_src, a_dst[:-1])
    with pytest.raises(ValueError, match=r"x must be \(sources, heads, features\)"):
        edge_softmax_aggregate(indptr, indices, x[:, 0], a_src, a_dst)
    with pytest.raises(TypeError, match="float32 and float64"):
        edge_softmax_aggregate(indptr, indices, x.half(), a_src, a_dst)
    with pytest.raises(TypeError, match="a_src has dtype torch.float64"):
        edge_softmax_aggregate(indptr, indices, x, a_src.double(), a_dst)
    with pytest.raises(ValueError, match=r"mask must be \("):
        edge_softmax_aggregate(indptr, indices, x, a_src, a_dst, mask=torch.ones(3, 2))
    bad = indices.clone()
    bad[4] = 11
    with pytest.raises(ValueError, match="indices"):
        edge_softmax_aggregate(indptr, bad, x, a_src, a_dst)
    with pytest.raises(ValueError, match="indptr"):
        edge_softmax_aggregate(indptr.flip(0), indices, x, a_src, a_dst)


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed")
def test_cuda_kernels_build_and_compute_the_same_on_the_emulator():
    from sparsetir.testing.cuda_emulator import emulate_module

    indptr, indices = structure(m=9, n=7, seed=4)
    heads, feat, slope = 2, 4, 0.2
    m, n, nnz = 9, 7, int(indices.numel())
    x, a_src, a_dst = (t.double().float() for t in operands(indptr, heads, feat))
    x, a_src = x[:n].contiguous(), a_src[:n].contiguous()
    mask = (torch.rand(nnz, heads, generator=torch.Generator().manual_seed(5)) > 0.3).float() / 0.7
    struct = {"J_indptr": indptr.numpy(), "J_indices": indices.numpy()}
    sizes = {"m": m, "n": n, "nnz": nnz}

    def emulate(func, arrays, size):
        emulate_module(scheduled_module(func, "cuda"), build(func, "cuda").source, arrays, sizes=size)

    out, alpha = np.full((m, heads, feat), np.nan, np.float32), np.full((nnz, heads), np.nan, np.float32)
    emulate(edge_softmax_function(heads, feat, negative_slope=slope, dropout=True),
            {"X": x.numpy(), "As": a_src.numpy(), "Ad": a_dst.numpy(), "P": alpha, "O": out, "Mk": mask.numpy(),
             **struct}, sizes)
    x_, s_, d_ = (t.clone().requires_grad_() for t in (x, a_src, a_dst))
    expected, expected_alpha = reference(indptr, indices, x_, s_, d_, slope, mask)
    np.testing.assert_allclose(out, expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(alpha, expected_alpha.detach().numpy(), rtol=1e-5, atol=1e-6)

    grad = torch.randn(m, heads, feat)
    d_x, d_src, d_dst = torch.autograd.grad(expected, (x_, s_, d_), grad)
    d_scores, got_dst = np.full((nnz, heads), np.nan, np.float32), np.full((m, heads), np.nan, np.float32)
    emulate(edge_softmax_backward_function(heads, feat, negative_slope=slope, dropout=True),
            {"dO": grad.numpy(), "X": x.numpy(), "O": out, "P": alpha, "As": a_src.numpy(), "Ad": a_dst.numpy(),
             "DZ": d_scores, "DAd": got_dst, "Mk": mask.numpy(), **struct}, sizes)
    np.testing.assert_allclose(got_dst, d_dst.numpy(), rtol=1e-4, atol=1e-5)

    rows = np.repeat(np.arange(m), np.diff(indptr.numpy()))
    order = np.lexsort((rows, indices.numpy()))  # the transposed structure: by source, then target
    t_indptr = np.concatenate([[0], np.cumsum(np.bincount(indices.numpy(), minlength=n))])
    got_x, got_src = np.full((n, heads, feat), np.nan, np.float32), np.full((n, heads), np.nan, np.float32)
    emulate(edge_aggregate_function(heads, feat),
            {"W": np.ascontiguousarray((alpha * mask.numpy())[order]), "Z": np.ascontiguousarray(d_scores[order]),
             "B": grad.numpy(), "C": got_x, "S": got_src, "J_indptr": t_indptr, "J_indices": rows[order]},
            {"m": n, "n": m, "nnz": nnz})
    np.testing.assert_allclose(got_x, d_x.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_src, d_src.numpy(), rtol=1e-4, atol=1e-5)
