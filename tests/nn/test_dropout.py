"""sparsetir.nn.dropout: torch's dropout distribution with PCG64's mask on the CPU: the keep rate and scale,
the forward's mask reused by the backward, reproducible under torch.manual_seed; GATConv's attention
dropout through it."""

from __future__ import annotations

import math

import pytest
import torch

from sparsetir.nn import GATConv
from sparsetir.nn.dropout import CHUNK, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.6])
def test_keep_rate_and_scale(p):
    x = torch.ones(3 * CHUNK + 17)  # several steps and a partial one
    out = dropout(x, p)
    kept = out != 0
    rate, n = kept.double().mean().item(), x.numel()
    assert abs(rate - (1 - p)) < 6 * math.sqrt(p * (1 - p) / n)  # six standard deviations
    torch.testing.assert_close(out[kept], torch.full((int(kept.sum()),), 1 / (1 - p)))
    for step in range(3):  # every full step draws its own entries (no repeated stream)
        assert abs(kept[step * CHUNK:(step + 1) * CHUNK].double().mean().item() - (1 - p)) < 0.02


def test_the_backward_uses_the_forwards_mask_and_a_seed_repeats_it():
    x = torch.randn(300, 70, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(5)
    out = dropout(x, 0.5)
    g = torch.randn_like(x)
    (grad,) = torch.autograd.grad(out, x, g)
    kept = out.detach() != 0
    torch.testing.assert_close(grad, torch.where(kept, 2 * g, torch.zeros_like(g)))
    torch.testing.assert_close(out.detach(), torch.where(kept, 2 * x.detach(), torch.zeros_like(g)))
    torch.manual_seed(5)
    assert torch.equal(dropout(x, 0.5).detach() != 0, kept)
    assert not torch.equal(dropout(x, 0.5).detach() != 0, kept)  # the next draw differs
    torch.manual_seed(5)
    assert torch.equal(keep_mask(x.shape, 0.5), kept)


def test_eval_zero_p_other_dtypes_and_bad_p():
    x = torch.randn(10, 4)
    assert dropout(x, 0.5, training=False) is x and dropout(x, 0.0) is x
    half = dropout(torch.ones(1000, dtype=torch.bfloat16), 0.5)  # torch's own dropout
    assert half.dtype == torch.bfloat16 and set(half.unique().tolist()) <= {0.0, 2.0}
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\)"):
        dropout(x, 1.0)


def test_gat_attention_dropout_is_reproducible_under_a_seed_and_keeps_gradients_finite():
    conv = GATConv(8, 4, heads=2, dropout=0.5)
    x = torch.randn(30, 8)
    edge_index = torch.randint(0, 30, (2, 120))
    torch.manual_seed(1)
    first = conv(x, edge_index)
    torch.manual_seed(1)
    again = conv(x, edge_index)
    torch.testing.assert_close(first, again)
    assert not torch.allclose(conv(x, edge_index), first)
    first.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in conv.parameters() if p.grad is not None)
