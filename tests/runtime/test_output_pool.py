"""Outputs of calls without out= are reused only once the caller holds no reference to them:
not while a result, a numpy view of it or a torch tensor sharing it is alive."""

from __future__ import annotations

import gc

import numpy as np
import scipy.sparse as sp
import torch

from sparsetir import compile_spmm
from sparsetir.runtime import output_pool

A = sp.random(2048, 512, density=0.01, format="csr", dtype=np.float32, random_state=0)
FEAT = 256  # a 2 MiB output: pooled


def kernel_and_operand():
    return compile_spmm(A, FEAT), np.random.default_rng(0).standard_normal((512, FEAT), dtype=np.float32)


def test_a_loop_reuses_two_buffers_and_results_stay_correct():
    kernel, B = kernel_and_operand()
    expected = A @ B
    seen = set()
    y = None
    for _ in range(6):
        y = kernel(B)
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
        seen.add(y.ctypes.data)
    assert len(seen) <= output_pool.SLOTS


def test_held_results_and_views_are_never_overwritten():
    kernel, B = kernel_and_operand()
    first = kernel(B)
    keep = first.copy()
    view = first[:, :3]
    del first
    gc.collect()
    second = kernel(2 * B)  # must not land in first's memory: the view keeps it
    third = kernel(3 * B)
    np.testing.assert_array_equal(view, keep[:, :3])
    assert not np.shares_memory(second, view) and not np.shares_memory(third, view)
    assert not np.shares_memory(second, third)


def test_torch_tensors_and_their_views_keep_the_buffer():
    kernel, B = kernel_and_operand()
    Bt = torch.from_numpy(B)
    first = kernel(Bt)
    assert isinstance(first, torch.Tensor)
    part = first[5:9]
    expected = part.clone()
    del first
    gc.collect()
    for scale in (2.0, 3.0, 4.0):
        kernel(Bt * scale)
    torch.testing.assert_close(part, expected)


def test_small_outputs_and_release():
    kernel = compile_spmm(A[:10], 4)
    B = np.ones((512, 4), np.float32)
    a, b = kernel(B), kernel(B)
    assert not np.shares_memory(a, b)
    big, B2 = kernel_and_operand()
    big(B2)
    big.release_outputs()
    assert big._outputs._arrays == []
