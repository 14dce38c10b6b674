"""Run compiled kernels with only the TVM runtime (the compiler is never imported here).

``load(path)`` returns a :class:`Kernel` for a kernel exported with ``Kernel.export``
(or a :class:`CompiledFunction` for an exported function).
"""

from __future__ import annotations

import json
from pathlib import Path

from .batched import BATCHED, BatchedKernel
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
    Kernel, BatchedKernel or CompiledFunction
        A kernel is called as it was before export, e.g. ``kernel(B, out=None, values=None)``
        (``kernel(q, k, v, out=None)`` for sparse attention).

    Raises
    ------
    FileNotFoundError
        The manifest sidecar is missing.
    """
    path = Path(path)
    manifest = sidecar(path, ".json")
    if not manifest.exists():
        raise FileNotFoundError(f"{manifest} not found: export with Kernel.export(path) first")
    meta = json.loads(manifest.read_text())
    if "kernel" in meta:
        kernel = meta["kernel"] if isinstance(meta, dict) else None
        spec = kernel.get("spec") if isinstance(kernel, dict) else None
        if isinstance(spec, dict) and BATCHED in spec:
            return BatchedKernel.load(path)
        return load_kernel(path)
    return CompiledFunction(path)


__all__ = ["BatchedKernel", "CompiledFunction", "Kernel", "cuda_available", "load"]
