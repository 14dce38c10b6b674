"""Load compiled kernel libraries with only the TVM *runtime* (no compiler needed).

Where the ``tvm`` package is installed, its ``lib/libtvm_runtime.so`` is used;
a bundle can instead point ``SPARSETIR_TVM_RUNTIME_DIR`` at a folder holding
``libtvm_runtime.so`` (and ``libtvm_runtime_cuda.so`` for CUDA kernels).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
from pathlib import Path

RUNTIME_DIR_ENV = "SPARSETIR_TVM_RUNTIME_DIR"
_loaded: set[str] = set()


def runtime_dir() -> Path:
    """Folder holding libtvm_runtime.so."""
    if os.environ.get(RUNTIME_DIR_ENV):
        return Path(os.environ[RUNTIME_DIR_ENV])
    try:  # find the wheel's files without importing the (possibly absent) compiler package
        return Path(importlib.metadata.distribution("apache-tvm").locate_file("tvm/lib"))
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(f"the TVM runtime was not found: install apache-tvm or set {RUNTIME_DIR_ENV}") from None


def _load_global(name: str) -> None:
    if name in _loaded:
        return
    path = runtime_dir() / name
    if not path.exists():
        raise RuntimeError(f"{path} is missing; the TVM runtime is incomplete")
    ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    _loaded.add(name)


def _runtime_symbols_loaded() -> bool:
    """Whether the process already has the TVM runtime's backend API (kernels call into it)."""
    return hasattr(ctypes.CDLL(None), "TVMBackendParallelLaunch")


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def ensure_runtime(device: str) -> None:
    """Make the TVM runtime (and its CUDA part for ``device == "cuda"``) available.

    TVM sizes its thread pool by *physical* cores guessed from the topology, which on
    some VMs is half the usable cores; unless ``TVM_NUM_THREADS`` is set, the pool gets
    every core this process may run on (read when the pool starts, at the first kernel).
    """
    import tvm_ffi  # noqa: F401, PLC0415 - libtvm_runtime needs libtvm_ffi loaded first, and only when used

    os.environ.setdefault("TVM_NUM_THREADS", str(usable_cores()))

    if not _runtime_symbols_loaded():  # with the compiler imported, its runtime is already in place
        _load_global("libtvm_runtime.so")
    if device == "cuda":
        _load_global("libtvm_runtime_cuda.so")


def cuda_available() -> tuple[bool, str]:
    """Whether a CUDA driver with at least one device is present, and why not."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False, "no CUDA driver (libcuda.so.1) on this machine"
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return False, "the CUDA driver reports no usable device"
    return True, ""


def load_module(path, device: str):
    """Load a kernel library exported by sparsetir (a tvm_ffi Module)."""
    if device == "cuda":
        ok, why = cuda_available()
        if not ok:
            raise RuntimeError(f"cannot run a CUDA kernel here: {why}")
    ensure_runtime(device)
    import tvm_ffi  # noqa: PLC0415 - after the runtime libraries (ensure_runtime)

    return tvm_ffi.load_module(str(path))
