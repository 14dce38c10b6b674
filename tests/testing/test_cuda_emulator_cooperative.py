"""The emulator's cooperative mode: a block's threads run as coroutines that meet at
``__syncthreads``, ``__shared__`` memory is one copy per block, and a warp matrix fragment holds
the whole tile in every thread (so the warp's loads, products and stores give the warp's result).
Without the mode such kernels are refused."""

from __future__ import annotations

import numpy as np
import pytest

from sparsetir.testing.cuda_emulator import EmulationNotValid, emulate_kernel

SOURCE = r"""
#include <mma.h>
extern "C" __global__ void __launch_bounds__(64) reverse(float* __restrict__ a, float* __restrict__ b, int n) {
  __shared__ float buf[64];
  buf[threadIdx.x] = a[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  b[blockIdx.x * 64 + threadIdx.x] = buf[63 - threadIdx.x] * 2.0f;
}
extern "C" __global__ void __launch_bounds__(32) mm(half* __restrict__ A, half* __restrict__ B, float* __restrict__ C) {
  __shared__ half As[256];
  __shared__ float Cs[256];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> a[1];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major> b[1];
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> c[1];
  for (int i = threadIdx.x; i < 256; i += 32) As[i] = A[i];
  __syncthreads();
  nvcuda::wmma::fill_fragment(c[0], 0.000000e+00f);
  nvcuda::wmma::load_matrix_sync(a[0], (&(As[0])), 16);
  nvcuda::wmma::load_matrix_sync(b[0], (&(B[0])), 16);
  nvcuda::wmma::mma_sync(c[0], a[0], b[0], c[0]);
  nvcuda::wmma::store_matrix_sync((&(Cs[0])), c[0], 16, nvcuda::wmma::mem_row_major);
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += 32) C[i] = Cs[i] + 1.0f;
}
"""


def test_shared_memory_and_barriers_need_the_cooperative_mode():
    a = np.arange(128, dtype=np.float32)
    b = np.zeros_like(a)
    with pytest.raises(EmulationNotValid):
        emulate_kernel(SOURCE, "reverse", [a, b, 128], (2,), (64,))
    emulate_kernel(SOURCE, "reverse", [a, b, 128], (2,), (64,), cooperative=True)
    np.testing.assert_array_equal(b, np.concatenate([a[:64][::-1], a[64:][::-1]]) * 2)


def test_a_warp_multiplies_tiles_with_the_matrix_api():
    rng = np.random.default_rng(0)
    A, B = (rng.standard_normal((16, 16)).astype(np.float16) for _ in range(2))
    C = np.zeros((16, 16), np.float32)
    emulate_kernel(SOURCE, "mm", [A, B, C], (1,), (32,), cooperative=True)
    # B loads column-major: the fragment is B's transpose
    np.testing.assert_allclose(C, A.astype(np.float32) @ B.astype(np.float32).T + 1, rtol=1e-5, atol=1e-5)
