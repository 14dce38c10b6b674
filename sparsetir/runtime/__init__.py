"""Run compiled kernels with only the TVM runtime (the compiler is never imported here).

``load(path)`` returns a :class:`Kernel` for a kernel exported with ``Kernel.export``
(or a :class:`CompiledFunction` for an exported function).
"""

from __future__ import annotations

import json
from pathlib import Path

from .function import CompiledFunction, sidecar
from .kernel import Kernel, load_kernel
from .loader import cuda_available


def load(path):
    """Load an exported kernel or function from ``path`` (the library; sidecars sit beside it)."""
    path = Path(path)
    manifest = sidecar(path, ".json")
    if not manifest.exists():
        raise FileNotFoundError(f"{manifest} not found: export with Kernel.export(path) first")
    if "kernel" in json.loads(manifest.read_text()):
        return load_kernel(path)
    return CompiledFunction(path)


__all__ = ["CompiledFunction", "Kernel", "cuda_available", "load"]
