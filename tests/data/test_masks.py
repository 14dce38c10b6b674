"""Block masks for sparse attention: Longformer's band, BigBird's band + global + random blocks,
the artifact's pixelfly butterfly, and DLMC's pruned weights read from the shared mirror."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.data import masks


def pixelfly(mb: int) -> np.ndarray:
    """The artifact's ``create_pixelfly`` (sparse-attention/utils.py), rewritten with numpy."""
    rows, cols = [], []
    stride = mb // 2
    while stride >= 1:
        for blk in range(mb // stride // 2):
            for i in range(2):
                for j in range(2):
                    for k in range(stride):
                        rows.append(blk * stride * 2 + i * stride + k)
                        cols.append(blk * stride * 2 + j * stride + k)
        stride >>= 1
    layout = np.zeros((mb, mb), bool)
    layout[rows, cols] = True
    return layout


@pytest.mark.parametrize("blocks", [2, 8, 64, 256])
def test_butterfly_is_the_artifacts_pixelfly(blocks):
    np.testing.assert_array_equal(masks.butterfly(blocks * 16, 16), pixelfly(blocks))


def test_butterfly_at_the_paper_size_is_over_90_percent_sparse():
    layout = masks.butterfly(4096, 16)
    assert layout.shape == (256, 256) and layout.dtype == bool
    assert masks.sparsity(layout) == pytest.approx(1 - 9 / 256)


def test_longformer_is_a_band_of_whole_blocks():
    layout = masks.longformer(256, 16, 20)  # 20 keys each side: 2 blocks
    rows, cols = np.nonzero(layout)
    assert np.abs(rows - cols).max() == 2
    assert layout.sum() == 16 + 2 * 15 + 2 * 14
    assert masks.longformer(256, 16, 0).sum() == 16  # the diagonal alone


def test_bigbird_has_its_band_global_and_random_blocks():
    layout = masks.bigbird(1024, 16, 16, 2, 3, seed=7)
    assert layout[:2].all() and layout[:, :2].all()
    band = masks.longformer(1024, 16, 16)
    assert (layout >= band).all()
    extra = layout & ~band
    extra[:2] = False
    extra[:, :2] = False
    assert (extra.sum(axis=1) <= 3).all() and extra.sum() > 0
    np.testing.assert_array_equal(layout, masks.bigbird(1024, 16, 16, 2, 3, seed=7))
    assert not np.array_equal(layout, masks.bigbird(1024, 16, 16, 2, 3, seed=8))


@pytest.mark.parametrize(("call", "match"), [
    (lambda: masks.longformer(100, 16, 8), "multiple of block"),
    (lambda: masks.longformer(128, 0, 8), "block"),
    (lambda: masks.longformer(128, 16, -1), "window"),
    (lambda: masks.butterfly(96, 16), "power-of-two"),
    (lambda: masks.bigbird(128, 16, 16, -1, 0), "n_global"),
])
def test_bad_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("name,shape,nnz", [("transformer/magnitude/0.9/attention_q", (512, 512), 26214),  # mirror
                                            ("transformer/magnitude/0.9/ffn_conv1", (2048, 512), 104857)])  # embedded
def test_dlmc_pruned_weights(real_data, name, shape, nnz):
    real_data("dlmc/" + name)
    pattern = masks.dlmc(name)
    assert sp.issparse(pattern) and pattern.shape == shape and pattern.nnz == nnz
    assert masks.dlmc(f"dlmc/{name}").nnz == pattern.nnz
    blocks = masks.dlmc(name, block=32)
    assert blocks.shape == (shape[0] // 32, shape[1] // 32) and blocks.dtype == bool
    dense = pattern.toarray().reshape(shape[0] // 32, 32, shape[1] // 32, 32).any(axis=(1, 3))
    np.testing.assert_array_equal(blocks, dense)


def test_block_pruned_weights_keep_whole_dense_blocks():
    from sparsetir.data.masks import block_pruned, pruned_weight

    W = block_pruned(2048, 512, 32, 0.9, seed=3)
    assert W.shape == (2048, 512) and W.dtype == bool
    blocks = W.toarray().reshape(64, 32, 16, 32).transpose(0, 2, 1, 3).reshape(64 * 16, 32 * 32)
    kept = blocks.any(axis=1)
    assert kept.sum() == round(0.1 * 64 * 16)  # 90% block sparsity
    assert blocks[kept].all()  # every kept block is non-zero in every entry
    assert (pruned_weight("block-pruned/2048x512/32/0.9") != block_pruned(2048, 512, 32, 0.9)).nnz == 0
    assert block_pruned(64, 64, 32, 0.99).nnz == 32 * 32  # at least one block

    for bad, match in (("block-pruned/2048x512/32", "block-pruned/<rows>x<cols>"),
                       ("block-pruned/2048x500/32/0.9", "multiples of block"),
                       ("block-pruned/2048x512/32/1.0", "sparsity")):
        with pytest.raises(ValueError, match=match):
            pruned_weight(bad)
    with pytest.raises(TypeError):
        pruned_weight(7)
