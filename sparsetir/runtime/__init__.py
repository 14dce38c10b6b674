"""Run compiled kernels with only the TVM runtime (the compiler is never imported here).

``load(path)`` returns a :class:`Kernel` for a kernel exported with ``Kernel.export``
(or a :class:`CompiledFunction` for an exported function).
"""

from __future__ import annotations

from pathlib import Path

from .batched import BATCHED, BatchedKernel
from .function import CompiledFunction, sidecar
from .kernel import Kernel, load_kernel
from .loader import cuda_available
from .manifest import read_export_manifest


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
    ValueError
        Anything read back is not what export wrote (``runtime.manifest``: the manifest's own digest,
        version and schema, field by field; then the digests of the library and the structure, the
        structure itself and, for attention, its block layout), naming the file and the field.
    """
    path = Path(path)
    meta = read_export_manifest(sidecar(path, ".json"))  # sealed, versioned, every field checked
    if "kernel" in meta:
        if BATCHED in meta["kernel"]["spec"]:
            return BatchedKernel.load(path)
        return load_kernel(path)
    return CompiledFunction(path, verify=True)


__all__ = ["BatchedKernel", "CompiledFunction", "Kernel", "cuda_available", "load"]
