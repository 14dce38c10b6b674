"""Build-only ``libcuda.so.1`` stub: compile it once, find it, and tell it from the real driver.

TVM's CUDA build path needs ``libtvm_runtime_cuda.so`` loaded, and that library links against
the NVIDIA driver (``libcuda.so.1``).  Without the driver TVM silently produces modules that carry
CUDA *source* instead of a fatbin.  ``cuda_stub.c`` provides the handful of driver symbols the
runtime imports, each answering "no device", so compilation works on GPU-less build hosts.

Load the stub only where :func:`real_libcuda_available` is False.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
from pathlib import Path

from .shared_library import compile_shared_library

STUB_SONAME = "libcuda.so.1"
STUB_SOURCE = Path(__file__).with_name("cuda_stub.c")
# A symbol only the stub defines (see cuda_stub.c).
STUB_MARKER_SYMBOL = "sparsetir_cuda_stub_marker"


def cache_root() -> Path:
    """``$SPARSETIR_CACHE_DIR`` or ``~/.cache/sparsetir``."""
    env = os.environ.get("SPARSETIR_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "sparsetir"


def _source_hash() -> str:
    return hashlib.sha256(STUB_SOURCE.read_bytes()).hexdigest()[:16]


def _c_compiler() -> str:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    raise RuntimeError("no C compiler found (tried $CC, cc, gcc, clang); needed to build the libcuda stub")


def stub_dir() -> Path:
    """Directory holding the compiled stub ``libcuda.so.1``, building it on first use.

    The directory is ``<cache>/cudastub/<hash of cuda_stub.c>/``, so an edited source gets a
    fresh build.  The library is written to a temporary name and renamed into place, so
    concurrent callers never see a half-written file.
    """
    out_dir = cache_root() / "cudastub" / _source_hash()
    lib = out_dir / STUB_SONAME
    if lib.is_file():
        return out_dir
    compiler = [_c_compiler(), "-shared", "-fPIC", "-O1", f"-Wl,-soname,{STUB_SONAME}"]
    compile_shared_library(compiler, STUB_SOURCE, lib)
    return out_dir


def stub_path() -> Path:
    """Path of the compiled stub library (built on first use)."""
    return stub_dir() / STUB_SONAME


def is_stub(lib: ctypes.CDLL) -> bool:
    """True when ``lib`` is this stub rather than the NVIDIA driver."""
    return hasattr(lib, STUB_MARKER_SYMBOL)


def real_libcuda_available() -> bool:
    """True when the dynamic loader finds the NVIDIA driver's ``libcuda.so.1``.

    A stub that is already loaded in this process answers to the same soname, so it is
    recognised by its marker symbol and does not count.
    """
    try:
        lib = ctypes.CDLL(STUB_SONAME)
    except OSError:
        return False
    return not is_stub(lib)


def preload_stub() -> Path | None:
    """Load the stub globally when no real driver exists; return its path, or None if not needed.

    Call this before ``libtvm_runtime_cuda.so`` is loaded (that is, before ``import tvm``),
    or load that library again afterwards (see ``cuda_worker``).
    """
    if real_libcuda_available():
        return None
    path = stub_path()
    ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    return path
