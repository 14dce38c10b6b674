"""Dropout with torch's semantics and a faster generator on the CPU.

``dropout(x, p, training)`` is ``torch.nn.functional.dropout``'s distribution: each entry kept
independently with probability ``1 - p`` and scaled by ``1 / (1 - p)``, the rest zero; the backward
multiplies by the same mask (saved as a bool tensor of the kept entries, one byte an entry, as
torch's ``native_dropout`` saves its mask). On the CPU, for float32/float64, the mask is drawn by
numpy's PCG64 (``np.random.Generator.random`` in float32, an entry kept where it is at least
``p``: 24-bit resolution), seeded by one draw from torch's default generator, so
``torch.manual_seed`` makes it reproducible; uniforms, mask and scaled values are made step by
step (:data:`CHUNK` entries, in a buffer torch allocates), one pass over memory, where torch's
``bernoulli_`` was most of a GAT training epoch on pubmed (the input features' and the attention
weights' dropout). Other devices and dtypes use torch's own dropout.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["draw_keep", "dropout", "keep_mask"]

CHUNK = 1 << 16  # entries per step: the uniforms, the mask and the values of one step stay in the L2 cache


def _generator() -> np.random.Generator:
    """A PCG64 generator seeded from torch's default generator (one 62-bit draw)."""
    return np.random.default_rng(int(torch.randint(0, 2**62, (1,), dtype=torch.int64)))


def _steps(size: int):
    return ((start, min(start + CHUNK, size)) for start in range(0, size, CHUNK))


def keep_mask(shape, p: float) -> Tensor:
    """A CPU bool tensor of ``shape``: each entry True (kept) with probability ``1 - p``, independently."""
    keep = torch.empty(shape, dtype=torch.bool)
    flat = keep.view(-1).numpy()
    if flat.size:
        rng, uniforms = _generator(), torch.empty(min(CHUNK, flat.size), dtype=torch.float32).numpy()
        for start, stop in _steps(flat.size):
            part = uniforms[: stop - start]
            rng.random(out=part, dtype=np.float32)
            np.greater_equal(part, np.float32(p), out=flat[start:stop])
    return keep


def draw_keep(x: Tensor, p: float) -> Tensor:
    """A bool mask of ``x``'s shape on its device, each entry kept with probability ``1 - p``: :func:`keep_mask`
    (PCG64) on the CPU for float32/float64, torch's ``bernoulli_`` elsewhere (as :func:`dropout` chooses)."""
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        return keep_mask(x.shape, p)
    return torch.empty(x.shape, dtype=torch.bool, device=x.device).bernoulli_(1.0 - p)


def _masked_scale(values: Tensor, keep: Tensor, scale: float, p: float | None = None) -> Tensor:
    """``values * keep * scale`` step by step (one pass over memory); with ``p``, ``keep`` is drawn in the
    same steps (each entry kept with probability ``1 - p``)."""
    out = torch.empty_like(values)
    src, dst, mask = values.view(-1).numpy(), out.view(-1).numpy(), keep.view(-1).numpy()
    rng = _generator() if p is not None and src.size else None
    uniforms = torch.empty(min(CHUNK, src.size) if rng else 0, dtype=torch.float32).numpy()
    factor = src.dtype.type(scale)
    for start, stop in _steps(src.size):
        if rng is not None:
            part = uniforms[: stop - start]
            rng.random(out=part, dtype=np.float32)
            np.greater_equal(part, np.float32(p), out=mask[start:stop])
        np.multiply(src[start:stop], mask[start:stop], out=dst[start:stop])
        dst[start:stop] *= factor
    return out


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p, scale):
        keep = torch.empty(x.shape, dtype=torch.bool)
        out = _masked_scale(x.detach().contiguous(), keep, scale, p)
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return _masked_scale(grad.contiguous(), keep, ctx.scale), None, None


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """``torch.nn.functional.dropout(x, p, training)`` (module docstring): the CPU's mask from PCG64."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p!r}")
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or x.layout != torch.strided:
        return torch.nn.functional.dropout(x, p=p, training=True)
    return _Dropout.apply(x, float(p), 1.0 / (1.0 - p))
