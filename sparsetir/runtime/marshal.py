"""Pass numpy arrays and torch tensors into compiled kernels, zero-copy where it is safe.

Kernels declare a 16-byte buffer alignment, which numpy and torch allocations
guarantee. An array that is non-contiguous or below that alignment is copied
(and, for outputs, copied back after the call): passing it as is could crash
vectorised code.
"""

from __future__ import annotations

import numpy as np

ALIGNMENT = 16


def is_torch(array) -> bool:
    return type(array).__module__.startswith("torch")


def _aligned(address: int) -> bool:
    return address % ALIGNMENT == 0


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised numpy array whose data pointer is ALIGNMENT-aligned."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dtype.itemsize + ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def safe_layout(array):
    """``array`` itself when it is contiguous and aligned, else an aligned contiguous copy."""
    if is_torch(array):
        if array.is_contiguous() and _aligned(array.data_ptr()):
            return array
        copy = array.contiguous() if not array.is_contiguous() else array.clone()
        if not _aligned(copy.data_ptr()):
            raise RuntimeError("torch returned a misaligned tensor copy")
        return copy
    if array.size == 0:  # numpy gives empty arrays zero strides, which TVM rejects as non-compact
        return aligned_empty(array.shape, array.dtype)
    if array.flags.c_contiguous and _aligned(array.ctypes.data):
        return array
    copy = aligned_empty(array.shape, array.dtype)
    copy[...] = array
    return copy


def to_ffi(array):
    """An argument for a compiled function (a tvm_ffi.Tensor for numpy; torch passes as is)."""
    if is_torch(array):
        return array
    import tvm_ffi

    try:
        capsule = array.__dlpack__(max_version=(1, 0))  # versioned DLPack also carries read-only arrays
    except TypeError:  # numpy < 2.1
        capsule = array
    return tvm_ffi.from_dlpack(capsule)


class Marshalled:
    """Arguments ready for a call, plus the outputs that must be copied back afterwards."""

    def __init__(self):
        self.args: list = []
        self.copy_back: list[tuple] = []  # (user array, kernel array)

    def add_input(self, array) -> None:
        self.args.append(to_ffi(safe_layout(array)))

    def add_output(self, array) -> None:
        if not is_torch(array) and not array.flags.writeable:
            raise ValueError("the output array is read-only")
        kernel_array = safe_layout(array)
        if kernel_array is not array:
            self.copy_back.append((array, kernel_array))
        self.args.append(to_ffi(kernel_array))

    def add_scalar(self, value) -> None:
        self.args.append(int(value))

    def finish(self) -> None:
        for user_array, kernel_array in self.copy_back:
            if is_torch(user_array):
                user_array.copy_(kernel_array)
            else:
                user_array[...] = kernel_array
