"""Block-sparse attention equals torch's SDPA with the same dense mask: every mask kind, block 16
and 32, layouts per head, fully masked rows, a sequence that is no multiple of 64, batches; in
every format, fused per row or stage by stage; float32 within 1e-5, float16/bfloat16 within 1e-2."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sparsetir.data import masks
from sparsetir.ops import compile_sparse_attention, sparse_attention
from sparsetir.reference.sparse_attention import dense_mask
from sparsetir.runtime import load


def sdpa(q, k, v, layout, block):
    """torch SDPA with the dense boolean mask; rows with no key give zeros (SDPA gives NaN there)."""
    mask = torch.from_numpy(dense_mask(np.asarray(layout, bool), block, q.shape[2], k.shape[2]))
    if mask.ndim == 3:
        mask = mask[None]
    out = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    return torch.nan_to_num(out, nan=0.0)


def relative_error(got, expected) -> float:
    got = torch.as_tensor(got).double()
    return float((got - expected).abs().max() / expected.abs().max())


def operands(batch, heads, seq, dim=64, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, seq, dim, generator=generator).to(dtype) for _ in range(3)]


MASK_KINDS = {
    "longformer": lambda seq, block: masks.longformer(seq, block, 2 * block),
    "bigbird": lambda seq, block: masks.bigbird(seq, block, block, 1, 2, seed=3),
    "butterfly": lambda seq, block: masks.butterfly(seq, block),
}


@pytest.mark.parametrize("kind", sorted(MASK_KINDS))
def test_every_mask_kind_matches_sdpa_in_float32(kind):
    layout = MASK_KINDS[kind](256, 16)
    q, k, v = operands(2, 2, 256)
    out = sparse_attention(q, k, v, layout, block=16)
    assert out.dtype == torch.float32 and out.shape == q.shape
    assert relative_error(out, sdpa(q, k, v, layout, 16)) <= 1e-5


@pytest.mark.parametrize("fmt", ["bsr", "dbsr", "srbcrs", "csr"])
@pytest.mark.parametrize("fuse_rows", [True, False])
def test_every_format_fused_or_not_matches_sdpa(fmt, fuse_rows):
    layout = masks.bigbird(128, 16, 16, 1, 1, seed=1)
    layout[5] = False  # a block row with no key at all: zeros
    q, k, v = operands(1, 2, 128, seed=2)
    out = sparse_attention(q, k, v, layout, block=16, format=fmt, fuse_rows=fuse_rows)
    assert relative_error(out, sdpa(q, k, v, layout, 16)) <= 1e-5
    assert torch.all(out[:, :, 5 * 16:6 * 16] == 0)


def test_block_32_per_head_layouts_and_batches():
    rng = np.random.default_rng(4)
    layout = rng.random((3, 6, 6)) < 0.35
    layout[1, 2] = False
    q, k, v = operands(2, 3, 192, seed=5)
    out = sparse_attention(q, k, v, layout, block=32)
    assert relative_error(out, sdpa(q, k, v, layout, 32)) <= 1e-5


def test_a_sequence_that_is_no_multiple_of_64_or_of_the_block():
    layout = masks.longformer(112, 16, 16)  # 7 blocks
    q, k, v = operands(1, 2, 112, seed=6)
    assert relative_error(sparse_attention(q, k, v, layout, block=16), sdpa(q, k, v, layout, 16)) <= 1e-5
    q, k, v = (x[:, :, :100] for x in operands(1, 2, 112, seed=7))  # the last block is partial
    out = sparse_attention(q, k, v, layout, block=16, format="srbcrs")
    assert out.shape == q.shape
    assert relative_error(out, sdpa(q, k, v, layout, 16)) <= 1e-5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_accumulates_in_float32(dtype):
    layout = masks.butterfly(256, 32)
    q, k, v = operands(1, 2, 256, dtype=dtype, seed=8)
    out = sparse_attention(q, k, v, layout, block=32)
    assert out.dtype == dtype
    assert relative_error(out, sdpa(q.float(), k.float(), v.float(), layout, 32)) <= 1e-2


def test_numpy_operands_an_out_array_and_a_scale():
    layout = masks.longformer(128, 16, 16)
    q, k, v = (x.numpy() for x in operands(1, 1, 128, seed=9))
    out = np.full(q.shape, np.nan, np.float32)
    assert sparse_attention(q, k, v, layout, block=16, scale=0.3, out=out) is out
    expected = sdpa(*(torch.from_numpy(x * s) for x, s in ((q, 0.3 * 8), (k, 1.0), (v, 1.0))), layout, 16)
    assert relative_error(out, expected) <= 1e-5


def test_large_scores_stay_finite():
    """Scores near 1000 overflow exp without the row max subtracted; float32 scores of that size
    carry absolute errors near 1e-4, hence the wider bound."""
    layout = masks.longformer(128, 16, 32)
    q, k, v = operands(1, 1, 128, seed=10)
    out = sparse_attention(q * 30, k * 30, v, layout, block=16)
    assert torch.isfinite(out).all()
    assert relative_error(out, sdpa(q * 30, k * 30, v, layout, 16)) <= 1e-3


def test_a_compiled_kernel_runs_any_batch_and_exports(tmp_path):
    layout = masks.butterfly(128, 16)
    kernel = compile_sparse_attention(layout, 64, block=16)
    assert set(kernel.timings) == {"convert_s", "compile_s"}
    assert "sparse_attention" in kernel.source
    for batch, heads in ((1, 1), (3, 2)):
        q, k, v = operands(batch, heads, 128, seed=batch)
        assert relative_error(kernel(q, k, v), sdpa(q, k, v, layout, 16)) <= 1e-5
    loaded = load(kernel.export(tmp_path / "attention.so"))
    q, k, v = operands(2, 4, 128, seed=11)
    assert torch.equal(loaded(q, k, v), kernel(q, k, v))


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda q, lay: sparse_attention(q, q, q, lay, block=16, format="bsr:32"), ValueError, "blocks of 32"),
    (lambda q, lay: sparse_attention(q, q, q, lay, block=16, format="hyb"), ValueError, "runs in"),
    (lambda q, lay: sparse_attention(q, q, q, lay[:4], block=16), ValueError, "query sequence"),
    (lambda q, lay: sparse_attention(q[0], q[0], q[0], lay, block=16), ValueError, "batch, heads"),
    (lambda q, lay: sparse_attention(q, q, q.double(), lay, block=16), TypeError, "share a dtype"),
    (lambda q, lay: sparse_attention(q, q, q, [[True]], block=16), TypeError, "layout must be"),
    (lambda q, lay: sparse_attention(q, q, q, lay, block=16, scale=-1.0), ValueError, "scale"),
    (lambda q, lay: sparse_attention(q, q, q, lay, block=16, vector_width=4), TypeError, "knob"),
    (lambda q, lay: sparse_attention(q, q, q, np.stack([lay, lay]), block=16), ValueError, "heads"),
])
def test_bad_input_is_refused_before_any_kernel_runs(call, error, match):
    q = operands(1, 3, 128)[0]
    with pytest.raises(error, match=match):
        call(q, masks.longformer(128, 16, 16))


def test_a_layout_as_torch_tensor_or_scipy_matrix_gives_the_same_result():
    import scipy.sparse as sp

    layout = masks.bigbird(128, 16, 16, 1, 1, seed=2)
    q, k, v = operands(1, 2, 128, seed=12)
    expected = sparse_attention(q, k, v, layout, block=16)
    for other in (torch.from_numpy(layout), sp.csr_matrix(layout)):
        assert torch.equal(sparse_attention(q, k, v, other, block=16), expected)
