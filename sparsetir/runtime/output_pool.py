"""Outputs a kernel hands out when the caller passes no ``out=``, reused once the caller let go.

A fresh output of tens of MB costs page faults on first touch (large allocations are fresh
``mmap``s), which the kernel's time then carries: about a fifth of an SpMM call measured here.
So a kernel keeps the last ``SLOTS`` outputs it allocated and hands one out again once nothing
else references it: numpy views keep their base array alive (``.base``) and a torch tensor made
by ``torch.from_numpy`` keeps the array alive through its storage, so an array whose reference
count is down to the pool's own is free. Two slots cover ``y = kernel(x)`` in a loop, where the
previous result is still bound while the next call runs.

Outputs under ``MIN_BYTES``, CUDA outputs (torch's caching allocator already reuses memory) and
bfloat16 torch outputs (numpy has no bfloat16 for ``from_numpy``) are allocated fresh each call.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np

from .marshal import ALIGNMENT, is_torch
from .validate import numpy_dtype

SLOTS = 2
MIN_BYTES = 1 << 20
# references to a free pooled array while it is inspected: the pool's list, the loop variable and
# getrefcount's own argument
_FREE_REFCOUNT = 3


class OutputPool:
    """Up to ``SLOTS`` reusable output arrays of one kernel (thread-safe)."""

    def __init__(self):
        self._arrays: list[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, shape: tuple, dtype: str, reference):
        """An output like ``reference`` (numpy, or a CPU torch tensor), or None where pooling does
        not apply (the caller then allocates as before)."""
        np_dtype = numpy_dtype(dtype)
        nbytes = math.prod(int(extent) for extent in shape) * np_dtype.itemsize  # np.prod of a tuple: ~10 us
        torch_out = is_torch(reference)
        if nbytes < MIN_BYTES or (torch_out and (reference.device.type != "cpu" or dtype == "bfloat16")):
            return None
        with self._lock:
            array = self._free(shape, np_dtype)
            if array is None:
                array = np.empty(shape, dtype=np_dtype)  # owns its memory, so views reference it
                if array.ctypes.data % ALIGNMENT:
                    return None
                self._arrays = [*self._arrays[-(SLOTS - 1):], array] if SLOTS > 1 else [array]
            result = array
            if torch_out:
                import torch  # noqa: PLC0415 - only for torch inputs

                result = torch.from_numpy(array)
        return result

    def _free(self, shape, np_dtype):
        for array in self._arrays:
            if array.shape == tuple(shape) and array.dtype == np_dtype and sys.getrefcount(array) <= _FREE_REFCOUNT:
                return array
        return None

    def release(self) -> None:
        """Forget the pooled outputs (the memory is freed once the caller's references go too)."""
        with self._lock:
            self._arrays = []
