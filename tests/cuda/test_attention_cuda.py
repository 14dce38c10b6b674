"""Block-sparse attention on CUDA without a GPU: every format and dtype generates CUDA C, the
float16/bfloat16 kernels use the warp matrix API (tensor cores), and the emulated kernels (threads
of a block as coroutines meeting at barriers, shared memory, whole-tile wmma fragments) equal
torch SDPA with the same dense mask; nvcc builds them."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from sparsetir.backend.cuda import cuda_source, nvcc_available
from sparsetir.ops import compile_sparse_attention
from sparsetir.ops.attention import prepare_structure, scheduled_attention
from sparsetir.reference.sparse_attention import dense_mask
from sparsetir.testing.cuda_emulator import emulate_module

NVCC, WHY = nvcc_available()
FORMATS = ["bsr", "dbsr", "srbcrs"]
DTYPES = ["float32", "float16", "bfloat16"]
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}


def layout_with_an_empty_row(blocks=4):
    layout = np.random.default_rng(0).random((blocks, blocks)) < 0.5
    layout[1] = False  # a query block row with no key: zeros
    layout[0, 0] = True
    return layout


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy view sharing the tensor's memory (bfloat16 through ml_dtypes)."""
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def sdpa(q, k, v, layout, block):
    mask = torch.from_numpy(dense_mask(layout, block, q.shape[-2], k.shape[-2]))
    out = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    return torch.nan_to_num(out, nan=0.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_and_dtype_generates_cuda_with_tensor_cores_for_half_precision(fmt, dtype):
    structure = prepare_structure(layout_with_an_empty_row(), 16, fmt, device="cuda")
    tensor_cores = dtype != "float32"
    source = cuda_source(scheduled_attention(structure, 32, dtype=dtype, device="cuda",
                                             settings={"tensor_cores": tensor_cores}))
    if tensor_cores:
        for call in ("wmma::load_matrix_sync", "wmma::mma_sync", "wmma::store_matrix_sync", "__shared__"):
            assert call in source, f"{call} missing from the tensor-core kernels"
    else:
        assert "wmma" not in source


# Emulation compiles each kernel with g++ (seconds each): every format and every dtype once.
@pytest.mark.parametrize(("fmt", "dtype"), [("bsr", "float32"), ("bsr", "float16"), ("dbsr", "float16"),
                                            ("srbcrs", "bfloat16")])
def test_emulated_cuda_attention_equals_sdpa(fmt, dtype):
    block, seq, heads, dim = 16, 64, 2, 32
    layout = layout_with_an_empty_row(seq // block)
    structure = prepare_structure(layout, block, fmt, device="cuda")
    mod = scheduled_attention(structure, dim, dtype=dtype, device="cuda", settings={"tensor_cores": True})
    source = cuda_source(mod)
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(heads, seq, dim, generator=generator).to(getattr(torch, dtype)) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    arrays = {"Q": as_numpy(q), "K": as_numpy(k), "V": as_numpy(v), "O": as_numpy(out), **structure.bound}
    emulate_module(mod, source, arrays, sizes={"g": heads}, cooperative=True)
    expected = sdpa(q, k, v, layout, block)
    assert float((out.double() - expected).abs().max() / expected.abs().max()) <= TOLERANCE[dtype]
    assert torch.all(out[:, block:2 * block] == 0)


# nvcc takes 15-40 s a kernel here: one build, the bfloat16 tensor cores (the other formats' and
# dtypes' CUDA C is checked above, and their emulated kernels run it).
@pytest.mark.slow
@pytest.mark.skipif(not NVCC, reason=f"needs nvcc to build CUDA kernels: {WHY}")
def test_nvcc_builds_the_bfloat16_tensor_core_kernels():
    kernel = compile_sparse_attention(layout_with_an_empty_row(), 64, block=16, format="bsr", dtype="bfloat16",
                                      target="cuda", tensor_cores=True)
    assert kernel.device == "cuda"
    assert "wmma::mma_sync" in kernel.source
