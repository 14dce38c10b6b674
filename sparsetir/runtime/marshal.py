"""Pass numpy arrays and torch tensors into compiled kernels, zero-copy where it is safe.

Kernels declare a 16-byte buffer alignment, which numpy and torch allocations
guarantee. An array that is non-contiguous or below that alignment is copied
(and, for outputs, copied back after the call): passing it as is could crash
vectorised code. The checks run in tvm_ffi's C code, because every Python
attribute lookup on the call path costs microseconds when the caches are cold.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .validate import numpy_dtype

ALIGNMENT = 16


def is_torch(array) -> bool:
    return type(array).__module__.startswith("torch")


def byte_range(array) -> tuple[str, int, int]:
    """(device, first byte, one past the last byte) of the memory ``array`` may touch."""
    if is_torch(array):
        storage = array.untyped_storage()
        return str(array.device), storage.data_ptr(), storage.data_ptr() + storage.nbytes()
    low, high = np.lib.array_utils.byte_bounds(array) if hasattr(np.lib, "array_utils") else np.byte_bounds(array)
    return "cpu", low, high


def may_overlap(a, b) -> bool:
    """Whether two numpy arrays or torch tensors may share memory (a cheap, conservative test)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    (da, la, ha), (db, lb, hb) = byte_range(a), byte_range(b)
    return da == db and la < hb and lb < ha and ha > la and hb > lb


def check_no_grad(array, name: str) -> None:
    """A TypeError for a torch tensor that requires grad while autograd is on: a kernel call is not
    recorded by autograd, so its result would be silently detached."""
    if is_torch(array) and array.requires_grad:
        import torch  # noqa: PLC0415 - only for torch inputs

        if torch.is_grad_enabled():
            raise TypeError(
                f"{name} requires grad, but this call is not recorded by autograd (its result would be detached "
                "silently); call it under torch.no_grad() or pass a detached tensor (.detach())")


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised numpy array whose data pointer is ALIGNMENT-aligned."""
    dtype = numpy_dtype(dtype)
    count = math.prod(int(extent) for extent in shape)  # Python ints: np.prod of a tuple costs ~10 us a call
    raw = np.empty(count * dtype.itemsize + ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def aligned_copy(array):
    """A contiguous, aligned copy of a numpy array or torch tensor."""
    if is_torch(array):
        copy = array.contiguous() if not array.is_contiguous() else array.clone()
        if copy.data_ptr() % ALIGNMENT:
            raise RuntimeError("torch returned a misaligned tensor copy")
        return copy
    copy = aligned_empty(array.shape, array.dtype)
    copy[...] = array
    return copy


def _import_numpy(array):
    """A tvm_ffi tensor viewing ``array``; tvm_ffi raises ValueError or RuntimeError when it is
    misaligned or non-contiguous."""
    import tvm_ffi  # noqa: PLC0415 - after the runtime libraries (loader.ensure_runtime)

    try:
        return tvm_ffi.from_dlpack(array, require_alignment=ALIGNMENT, require_contiguous=True)
    except BufferError:  # read-only arrays only export over versioned DLPack
        capsule = array.__dlpack__(max_version=(1, 0))
        return tvm_ffi.from_dlpack(capsule, require_alignment=ALIGNMENT, require_contiguous=True)


def kernel_argument(array, *, output: bool = False):
    """``(argument, staging)``: what to pass to the kernel, and for an output that had to be
    copied, the copy to write back into ``array`` after the call (else None)."""
    if is_torch(array):
        if not array.numel():  # torch calls an empty tensor contiguous whatever its strides (from_numpy: 0)
            import torch  # noqa: PLC0415 - only for torch arrays

            return torch.empty(array.shape, dtype=array.dtype, device=array.device), None  # nothing to copy back
        if array.is_contiguous() and array.data_ptr() % ALIGNMENT == 0:
            return array, None
        copy = aligned_copy(array)
        return copy, (copy if output else None)
    if output and not array.flags.writeable:
        raise ValueError("the output array is read-only")
    if array.dtype.name == "bfloat16":  # numpy's DLPack has no bfloat16: a torch view of the same memory
        import torch  # noqa: PLC0415 - only for bfloat16 numpy arrays (ml_dtypes)

        if not array.size:
            return torch.empty(array.shape, dtype=torch.bfloat16), None
        if array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0:
            with warnings.catch_warnings():  # a read-only input (a kernel's own structure) is only read
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16), None
        copy = aligned_copy(array)
        return torch.from_numpy(copy.view(np.int16)).view(torch.bfloat16), (copy if output else None)
    if array.size:
        try:
            return _import_numpy(array), None
        except (ValueError, RuntimeError):
            pass
    copy = aligned_copy(array)  # also gives empty arrays the strides TVM expects
    return _import_numpy(copy), (copy if output else None)


class Marshalled:
    """Arguments ready for a call, plus the outputs that must be copied back afterwards."""

    def __init__(self):
        self.args: list = []
        self.copy_back: list[tuple] = []  # (user array, kernel array)

    def add(self, array, *, output: bool = False) -> None:
        argument, staging = kernel_argument(array, output=output)
        if staging is not None:
            self.copy_back.append((array, staging))
        self.args.append(argument)

    def finish(self) -> None:
        for user_array, kernel_array in self.copy_back:
            if is_torch(user_array):
                user_array.copy_(kernel_array)
            else:
                user_array[...] = kernel_array
