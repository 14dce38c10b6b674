"""Attention baselines in torch: SDPA with the dense mask, FlexAttention with a ``BlockMask``, and
torch's sparse tensors (CSR SDDMM, a segment softmax, then BSR times V); Triton block-sparse on a GPU.

Every factory takes the operands ``(batch, heads, seq, dim)`` (numpy or torch), the boolean block
layout (shared, or one per head) and its block, converts once (outside timing) and returns a
zero-argument callable computing O. Setup that is not kernel time is reported in ``run.timings``:
FlexAttention's ``torch.compile`` (``compile_s``, once per shape; about half a minute on 2 CPU
cores with a cold inductor cache) and the sparse conversions (``convert_s``).

Variants (op ``sparse_attention``):

- ``sdpa-dense-mask``: ``scaled_dot_product_attention(q, k, v, attn_mask=dense bool mask)``;
- ``sdpa-dense``: SDPA without a mask (dense attention: the work a mask saves);
- ``flex-attention``: ``flex_attention`` under ``torch.compile`` with ``create_block_mask`` of the
  element mask at FlexAttention's block size (option ``flex_block``, default 128; 0 uses the
  layout's block); ``flex-attention-fine``: the same with the layout's own block (the better of
  the two depends on the mask: a coarse block wastes work on scattered masks);
- ``torch-bsr``: per (batch, head) slice, ``sampled_addmm`` on the element CSR pattern,
  ``segment_reduce`` max and sum for the softmax, the probabilities gathered into BSR blocks
  and ``torch.mm(P_bsr, v)``;
- ``triton-blocksparse`` (CUDA): ``torch.sparse._triton_ops`` ``bsr_dense_mm`` with
  ``sampled_addmm`` on BSR (the ``triton`` package dropped its own block-sparse ops in 3.x).
Fully masked rows give zeros in every variant (SDPA's NaN rows are zeroed).
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import torch

from baselines import Variant

DEFAULT_FLEX_BLOCK = 128


def _backend(device: str) -> tuple[bool, str]:
    return True, f"torch {torch.__version__} ({'CUDA ' + str(torch.version.cuda) if device == 'cuda' else 'CPU'})"


def _tensors(device: str, *arrays):
    out = []
    for array in arrays:
        tensor = array if isinstance(array, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(array))
        out.append(tensor.to(device).contiguous())
    return out


def _element_mask(layout, block: int, q_len: int, k_len: int) -> np.ndarray:
    layout = np.asarray(layout, dtype=bool)
    expanded = np.repeat(np.repeat(layout, block, axis=-2), block, axis=-1)
    return np.ascontiguousarray(expanded[..., :q_len, :k_len])


def sdpa_dense_mask(q, k, v, layout, block: int, *, device: str = "cpu", scale: float | None = None):
    """SDPA with the dense boolean mask ``(q_len, k_len)`` (or per head); NaN rows become 0."""
    q, k, v = _tensors(device, q, k, v)
    mask = torch.from_numpy(_element_mask(layout, block, q.shape[2], k.shape[2])).to(device)
    if mask.ndim == 3:
        mask = mask[None]
    empty_rows = ~mask.any(dim=-1, keepdim=True)
    fix = bool(empty_rows.any())
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run():
        out = sdpa(q, k, v, attn_mask=mask, scale=scale)
        return out.masked_fill_(empty_rows, 0.0) if fix else out

    run.timings = {}
    return run


def sdpa_dense(q, k, v, layout, block: int, *, device: str = "cpu", scale: float | None = None):
    """SDPA without a mask: every query attends to every key (not the same result; the dense cost)."""
    q, k, v = _tensors(device, q, k, v)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run():
        return sdpa(q, k, v, scale=scale)

    run.timings = {}
    run.same_result = False
    return run


_compiled_flex: dict = {}


def flex_attention(q, k, v, layout, block: int, *, device: str = "cpu", scale: float | None = None,
                   flex_block: int = DEFAULT_FLEX_BLOCK):
    """FlexAttention under ``torch.compile`` with a ``BlockMask`` of the element mask; the compile
    (first call, once per shape and process) is ``run.timings["compile_s"]``."""
    from torch.nn.attention.flex_attention import create_block_mask  # noqa: PLC0415 - torch >= 2.5 only
    from torch.nn.attention.flex_attention import flex_attention as flex  # noqa: PLC0415

    q, k, v = _tensors(device, q, k, v)
    layout_t = torch.from_numpy(np.asarray(layout, dtype=bool)).to(device)
    per_head = layout_t.ndim == 3

    def mask_mod(b, h, q_idx, kv_idx):
        if per_head:
            return layout_t[h, q_idx // block, kv_idx // block]
        return layout_t[q_idx // block, kv_idx // block]

    started = time.perf_counter()
    flex_size = int(flex_block) or block
    block_mask = create_block_mask(mask_mod, None, layout_t.shape[0] if per_head else None, q.shape[2], k.shape[2],
                                   device=device, BLOCK_SIZE=flex_size)
    convert_s = time.perf_counter() - started
    compiled = _compiled_flex.setdefault(device, torch.compile(flex, dynamic=False))
    rows_empty = ~torch.from_numpy(_element_mask(layout, block, q.shape[2], k.shape[2]).any(axis=-1)).to(device)
    fix = bool(rows_empty.any())
    if per_head:
        rows_empty = rows_empty[None, :, :, None]
    else:
        rows_empty = rows_empty[None, None, :, None]
    started = time.perf_counter()
    with torch.no_grad():
        compiled(q, k, v, block_mask=block_mask, scale=scale)
    compile_s = time.perf_counter() - started

    def run():
        with torch.no_grad():
            out = compiled(q, k, v, block_mask=block_mask, scale=scale)
        return out.masked_fill_(rows_empty, 0.0) if fix else out

    run.timings = {"convert_s": convert_s, "compile_s": compile_s}
    return run


def torch_bsr(q, k, v, layout, block: int, *, device: str = "cpu", scale: float | None = None):
    """Per (batch, head) slice: CSR ``sampled_addmm`` scores, a segment softmax over each row's values,
    the probabilities gathered into BSR blocks, then ``torch.mm(P_bsr, v)``."""
    q, k, v = _tensors(device, q, k, v)
    batch, heads, q_len, dim = q.shape
    scale = 1.0 / math.sqrt(dim) if scale is None else float(scale)
    started = time.perf_counter()
    layout = np.asarray(layout, dtype=bool)
    per_head = layout.ndim == 3
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    plans = []
    for head in range(heads):
        blocks = layout[head] if per_head else layout
        if per_head or head == 0:
            plans.append(_bsr_plan(blocks, block, q_len, k.shape[2], q.dtype, device))
        else:
            plans.append(plans[0])
    convert_s = time.perf_counter() - started
    out = torch.zeros_like(q)

    def run():
        for b in range(batch):
            for h in range(heads):
                pattern, crow, bsr_crow, bsr_col, gather, padded, empty = plans[h]
                scores = torch.sparse.sampled_addmm(pattern, q[b, h], k[b, h].T, beta=0.0, alpha=scale)
                values = scores.values()
                top = torch.segment_reduce(values, "max", offsets=crow)
                top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
                weights = torch.exp(values - torch.repeat_interleave(top, crow.diff()))
                total = torch.segment_reduce(weights, "sum", offsets=crow)
                probabilities = weights / torch.repeat_interleave(total, crow.diff())
                blocks = torch.cat([probabilities, probabilities.new_zeros(1)])[gather]
                matrix = torch.sparse_bsr_tensor(bsr_crow, bsr_col, blocks, size=padded)
                value_rows = v[b, h]
                if padded[1] != value_rows.shape[0]:
                    value_rows = torch.nn.functional.pad(value_rows, (0, 0, 0, padded[1] - value_rows.shape[0]))
                out[b, h] = torch.mm(matrix, value_rows)[:q_len]
        return out

    run.timings = {"convert_s": convert_s}
    return run


def _bsr_plan(blocks: np.ndarray, block: int, q_len: int, k_len: int, dtype, device):
    """The element CSR pattern, and for each BSR slot the position of its value in CSR order (the
    last index, one past the values, reads a zero: padding past ``k_len``)."""
    import scipy.sparse as sp  # noqa: PLC0415 - scipy only for the torch-bsr plan

    element = sp.csr_matrix(_element_mask(blocks, block, q_len, k_len).astype(np.float32))
    element.sort_indices()
    pattern = torch.sparse_csr_tensor(torch.from_numpy(element.indptr.astype(np.int64)),
                                      torch.from_numpy(element.indices.astype(np.int64)),
                                      torch.ones(element.nnz, dtype=dtype), size=element.shape).to(device)
    block_csr = sp.csr_matrix(blocks.astype(np.float32))
    block_csr.sort_indices()
    rows = np.repeat(np.arange(block_csr.shape[0]), np.diff(block_csr.indptr))
    position = sp.csr_matrix((np.arange(1, element.nnz + 1, dtype=np.float64), element.indices, element.indptr),
                             shape=element.shape)
    padded = (blocks.shape[0] * block, blocks.shape[1] * block)
    position.resize(padded)
    offsets = np.arange(block)
    r = (rows[:, None, None] * block + offsets[None, :, None]).repeat(block, axis=2)
    c = (block_csr.indices[:, None, None] * block + offsets[None, None, :]).repeat(block, axis=1)
    gather = np.asarray(position[r.reshape(-1), c.reshape(-1)]).reshape(-1).astype(np.int64) - 1
    gather[gather < 0] = element.nnz
    gather = torch.from_numpy(gather.reshape(-1, block, block)).to(device)
    crow = torch.from_numpy(element.indptr.astype(np.int64)).to(device)
    empty = torch.from_numpy(np.diff(element.indptr) == 0).to(device)
    return (pattern, crow, torch.from_numpy(block_csr.indptr.astype(np.int64)).to(device),
            torch.from_numpy(block_csr.indices.astype(np.int64)).to(device), gather, padded, empty)


def triton_blocksparse(q, k, v, layout, block: int, *, device: str = "cuda", scale: float | None = None):
    """Triton block-sparse (``torch.sparse._triton_ops``): BSR ``sampled_addmm`` scores, a dense-block
    softmax over each row of blocks, then ``bsr_dense_mm``; CUDA only."""
    if device != "cuda":
        raise RuntimeError("triton block-sparse runs on CUDA only")
    from torch.sparse._triton_ops import bsr_dense_mm, sampled_addmm  # noqa: PLC0415 - CUDA hosts only

    q, k, v = _tensors(device, q, k, v)
    batch, heads, q_len, dim = q.shape
    scale = 1.0 / math.sqrt(dim) if scale is None else float(scale)
    layout = np.asarray(layout, dtype=bool)
    shared = layout if layout.ndim == 2 else layout[0]
    if layout.ndim == 3 and not (layout == shared).all():
        raise ValueError("triton block-sparse here takes one layout for every head")
    block_csr = torch.from_numpy(shared.astype(np.float32)).to_sparse_csr()
    crow, col = block_csr.crow_indices().to(device), block_csr.col_indices().to(device)
    nnzb = int(col.numel())
    values = torch.ones(batch * heads, nnzb, block, block, dtype=q.dtype, device=device)
    pattern = torch.sparse_bsr_tensor(crow.expand(batch * heads, -1).contiguous(),
                                      col.expand(batch * heads, -1).contiguous(), values,
                                      size=(batch * heads, q_len, k.shape[2]))
    rows = torch.repeat_interleave(torch.arange(crow.numel() - 1, device=device), crow.diff())
    q3, k3, v3 = (x.reshape(batch * heads, -1, dim) for x in (q, k, v))

    def run():
        scores = sampled_addmm(pattern, q3, k3.transpose(1, 2), beta=0.0, alpha=scale)
        blocks = scores.values().float()  # (bh, nnzb, b, b)
        top = torch.full((batch * heads, crow.numel() - 1, block), -torch.inf, device=device)
        top = top.index_reduce_(1, rows, blocks.amax(dim=-1), "amax")
        weights = torch.exp(blocks - top[:, rows, :, None])
        total = torch.zeros_like(top).index_add_(1, rows, weights.sum(dim=-1))
        probabilities = (weights / total[:, rows, :, None]).to(q.dtype)
        matrix = torch.sparse_bsr_tensor(pattern.crow_indices(), pattern.col_indices(), probabilities,
                                         size=pattern.shape)
        return bsr_dense_mm(matrix, v3).reshape(batch, heads, q_len, dim)

    run.timings = {}
    return run


def flex_attention_fine(q, k, v, layout, block: int, **options):
    """FlexAttention with a ``BlockMask`` at the layout's own block size."""
    return flex_attention(q, k, v, layout, block, **{**options, "flex_block": 0})


# torch is a hard dependency (no probe). Every variant but dense SDPA computes the masked attention, so
# it counts among the references; dense SDPA (the work a mask saves) runs only when a config names it.
VARIANTS = {"sparse_attention": {
    "sdpa-dense-mask": Variant(sdpa_dense_mask, library_reference=True, check=_backend),
    "sdpa-dense": Variant(sdpa_dense, default=False, check=_backend),
    "flex-attention": Variant(flex_attention, library_reference=True, check=_backend),
    "flex-attention-fine": Variant(flex_attention_fine, library_reference=True, check=_backend),
    "torch-bsr": Variant(torch_bsr, library_reference=True, check=_backend),
    "triton-blocksparse": Variant(triton_blocksparse, devices=("cuda",), library_reference=True, check=_backend),
}}
