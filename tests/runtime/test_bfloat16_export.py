"""A bfloat16 kernel's exported structure reads back as bfloat16 (``.npy`` cannot name ml_dtypes'
bfloat16, so the export stores its bits and names the arrays: ``runtime.bound.BFLOAT16_ARRAYS``)."""

import numpy as np
import pytest
import torch

from sparsetir import runtime
from sparsetir.ops import compile_sparse_conv3d
from sparsetir.ops.conv import kernel_map
from sparsetir.runtime import bound


def _kernel():
    rng = np.random.default_rng(0)
    coords = np.unique(np.c_[np.zeros(200, int), rng.integers(0, 6, (200, 3))], axis=0)
    kmap = kernel_map(coords)
    X = torch.from_numpy(rng.standard_normal((len(coords), 16)).astype(np.float32)).to(torch.bfloat16)
    W = torch.from_numpy((rng.standard_normal((27, 16, 32)) / 12).astype(np.float32)).to(torch.bfloat16)
    return compile_sparse_conv3d(kmap, 16, 32, format="rtile:16:4", dtype="bfloat16"), X, W


def test_a_bfloat16_export_loads_back_and_computes_the_same(tmp_path):
    kernel, X, W = _kernel()
    library = kernel.export(tmp_path / "conv.so")
    with np.load(str(library) + ".npz") as npz:
        assert bound.BFLOAT16_ARRAYS in npz.files and npz["A"].dtype == np.uint16
    loaded = runtime.load(library)
    assert torch.equal(loaded(X, W), kernel(X, W))


def test_an_export_with_raw_two_byte_records_is_refused(tmp_path, monkeypatch):
    kernel, _, _ = _kernel()
    monkeypatch.setattr(bound, "_encode_bfloat16", lambda arrays: arrays)  # the export before the encoding
    library = kernel.export(tmp_path / "conv.so")
    with pytest.raises(ValueError, match="no numeric dtype"):
        runtime.load(library)
