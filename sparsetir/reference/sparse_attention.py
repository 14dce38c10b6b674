"""Block-sparse attention's reference: ``softmax(scale Q K^T on a block mask) V`` in float64.

Also the host-side reading of a block layout (numpy, torch or scipy; one per head or shared),
which both the compile side (``sparsetir.ops.attention``) and the baselines use. A query row
whose blocks are all masked gives zeros.
"""

from __future__ import annotations

import math

import numpy as np

from ..runtime.block_layout import check_block_layout
from .case import Case, host_array, rounding_tolerance
from .registry import OpReference, register_reference


def block_layout(layout) -> np.ndarray:
    """``layout`` as a numpy bool array ``(rows, cols)`` or ``(heads, rows, cols)``, validated by the one
    layout validator (``sparsetir.runtime.block_layout.check_block_layout``) before it is densified:
    numpy arrays (bool or numbers, non-zero means kept), dense or sparse torch tensors and scipy
    sparse matrices (2-D); anything else is a ``TypeError``, a bad shape or structure a ``ValueError``."""
    return check_block_layout(layout)


def dense_mask(layout: np.ndarray, block: int, q_len: int, k_len: int) -> np.ndarray:
    """The element mask ``(q_len, k_len)`` (or ``(heads, q_len, k_len)``) of a block layout."""
    expanded = np.repeat(np.repeat(layout, block, axis=-2), block, axis=-1)
    return np.ascontiguousarray(expanded[..., :q_len, :k_len])


def attention_reference(q, k, v, layout, block: int, scale: float | None = None) -> np.ndarray:
    """The float64 result for ``(batch, heads, seq, dim)`` operands (any array type)."""
    q64, k64, v64 = (host_array(x) for x in (q, k, v))
    scale = 1.0 / math.sqrt(q64.shape[-1]) if scale is None else float(scale)
    mask = dense_mask(block_layout(layout), block, q64.shape[2], k64.shape[2])
    if mask.ndim == 2:
        mask = mask[None]
    scores = np.einsum("bhqd,bhkd->bhqk", q64, k64) * scale
    scores = np.where(mask[None], scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = weights.sum(axis=-1, keepdims=True)
    # a row with no key is 0; a NaN total (a NaN or infinite score) propagates (docs/nan-semantics.md)
    with np.errstate(invalid="ignore"):  # inf / inf: the NaN SDPA gives too
        probabilities = np.divide(weights, total, out=np.zeros_like(weights), where=total != 0)
    return _weighted_values(probabilities, v64, mask[None])


def _weighted_values(probabilities: np.ndarray, v64: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``probabilities @ v`` over the kept keys only: a NaN or Inf in a value that a row does not attend
    to leaves the row alone (``0 * NaN`` would be NaN), one that it attends to reaches it, as the
    kernels compute (docs/nan-semantics.md)."""
    bad = ~np.isfinite(v64)
    out = np.einsum("bhqk,bhkd->bhqd", probabilities, np.where(bad, 0.0, v64))
    if bad.any():
        kept = np.broadcast_to(mask, probabilities.shape)
        for b, h, d in sorted({(b, h, d) for b, h, _, d in zip(*np.nonzero(bad))}):
            products = np.where(kept[b, h], probabilities[b, h] * v64[b, h, :, d][None, :], 0.0)
            out[b, h, :, d] = products.sum(axis=-1)
    return out


def attention_case(layout, head_dim: int, rng: np.random.Generator, *, block: int = 16, batch: int = 1,
                   heads: int | None = None, dtype=np.float32) -> Case:
    """Random standard-normal q, k, v ``(batch, heads, seq, head_dim)`` for ``layout``."""
    layout = block_layout(layout)
    heads = layout.shape[0] if layout.ndim == 3 else (heads or 1)
    q_len, k_len = layout.shape[-2] * block, layout.shape[-1] * block
    q = rng.standard_normal((batch, heads, q_len, head_dim), dtype=np.float32).astype(dtype)
    k = rng.standard_normal((batch, heads, k_len, head_dim), dtype=np.float32).astype(dtype)
    v = rng.standard_normal((batch, heads, k_len, head_dim), dtype=np.float32).astype(dtype)
    return attention_reference_case(q, k, v, layout, block)


def attention_reference_case(q, k, v, layout, block: int, scale: float | None = None) -> Case:
    """The reference with its tolerance: float32 rounding of the two reductions, relative to |V|."""
    reference = attention_reference(q, k, v, layout, block, scale)
    keys = dense_mask(block_layout(layout), block, q.shape[2], k.shape[2]).sum(axis=-1)[..., None]
    magnitude = np.abs(host_array(v)).max() * np.ones_like(reference)
    tolerance = rounding_tolerance(magnitude, q.shape[-1] + keys) * 4
    min_bytes = sum(int(x.nbytes) for x in (q, k, v)) + int(q.nbytes)
    return Case((q, k, v), reference, tolerance, min_bytes)


def attention_flops(nnz: int, head_dim: int) -> int:
    """``4 nnz d``: the scores and the weighted sum, each a multiply and an add per kept (query, key) pair."""
    return 4 * nnz * head_dim


SPARSE_ATTENTION_REFERENCE = register_reference(OpReference(
    name="sparse_attention",
    make_case=attention_case,
    reference=attention_reference_case,
    flops=attention_flops,
))
