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
    """Load an exported kernel or function; needs only the TVM runtime.

    Parameters
    ----------
    path : str or Path
        The library ``Kernel.export`` (or ``CompiledFunction.export``) wrote; its sidecars
        ``<path>.json`` and ``<path>.npz`` sit beside it.

    Returns
    -------
    Kernel or CompiledFunction
        A kernel is called as it was before export, e.g. ``kernel(B, out=None, values=None)``.

    Raises
    ------
    FileNotFoundError
        The manifest sidecar is missing.
    """
    path = Path(path)
    manifest = sidecar(path, ".json")
    if not manifest.exists():
        raise FileNotFoundError(f"{manifest} not found: export with Kernel.export(path) first")
    if "kernel" in json.loads(manifest.read_text()):
        return load_kernel(path)
    return CompiledFunction(path)


__all__ = ["CompiledFunction", "Kernel", "cuda_available", "load"]
