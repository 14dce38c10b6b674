"""What every kernel bound to one structure shares: ``Kernel`` (``runtime.kernel``) and ``BatchedKernel``
(``runtime.batched``) are a compiled function, its spec and sizes, and the structure arrays bound to it.

:class:`BoundKernel` holds them and owns what does not depend on how the kernel is called: the
generated ``source``, its ``device`` and ``dtype``, the structure moved to the device and prepared
once, ``export`` (the library, ``<path>.npz`` with the structure and ``<path>.json`` with the digests)
and :func:`read_export` (the library and the structure read back with every digest checked).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from .function import SIDECAR_SHA256, CompiledFunction, check_digest, file_sha256, sidecar
from .marshal import aligned_empty, is_torch
from .validate import numpy_dtype

#: The sidecar array naming the arrays stored as the bits of bfloat16 values: ``.npy`` cannot name
#: ml_dtypes' bfloat16, so ``np.savez`` would write it as raw two-byte records that load as ``void16``.
BFLOAT16_ARRAYS = "__bfloat16__"

__all__ = ["BoundKernel", "empty_like", "host", "read_export"]


class BoundKernel:
    """A compiled function bound to one structure (``bound``: parameter name -> array) at ``sizes``.

    Subclasses add the call; they may extend :meth:`_sidecar_arrays` (arrays exported beside the
    structure), :meth:`_export_nnz` (the manifest's ``nnz``) and :meth:`_prepare` (how the structure
    is converted for the kernel)."""

    def __init__(self, function: CompiledFunction, spec: dict, bound: dict, sizes: dict):
        self.function = function
        self.spec = spec
        self.sizes = dict(sizes)
        self._bound = dict(bound)  # structure arrays and default values, by parameter name
        self._prepared: dict | None = None  # the same, converted once for the kernel

    # -- what the kernel is ----------------------------------------------------------------
    @property
    def source(self) -> str:
        """Generated source: CUDA C for CUDA kernels, LLVM IR for CPU kernels."""
        return self.function.source

    @property
    def device(self) -> str:
        return self.function.device

    @property
    def dtype(self) -> str:
        return self.spec["dtype"]

    # -- the structure ---------------------------------------------------------------------
    def _structure(self) -> dict:
        """The bound arrays converted for the kernel once (moved to the GPU for CUDA kernels)."""
        if self._prepared is None:
            self._prepared = self._prepare(self._on_device(self._bound))
        return self._prepared

    def _prepare(self, bound: dict) -> dict:
        return self.function.prepare(bound, self.sizes)

    def _on_device(self, arrays: dict) -> dict:
        if self.device != "cuda":
            return arrays
        import torch  # noqa: PLC0415 - torch loads only for CUDA kernels (the runtime runs numpy without it)

        return {k: torch.as_tensor(v).cuda() for k, v in arrays.items()}

    # -- export ----------------------------------------------------------------------------
    def _sidecar_arrays(self) -> dict:
        """The arrays ``<path>.npz`` holds: the bound structure on the host (subclasses add theirs)."""
        return {k: host(v) for k, v in self._bound.items()}

    def _export_nnz(self) -> int | None:
        return None

    def export(self, path) -> Path:
        """Write the library to ``path``; beside it ``<path>.json`` (the manifest, with the sha256 of the
        library and of the structure) and ``<path>.npz`` (the structure). ``sparsetir.runtime.load(path)``
        reads them back."""
        path = Path(path)
        arrays = _encode_bfloat16(self._sidecar_arrays())
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(sidecar(path, ".npz"), **arrays)
        return self.function.export(path, kernel={"spec": self.spec, "sizes": self.sizes, "nnz": self._export_nnz()},
                                    **{SIDECAR_SHA256: file_sha256(sidecar(path, ".npz"))})


def read_export(path, check_entry: Callable[[Path, object], None]) -> tuple[CompiledFunction, dict, dict]:
    """``(function, kernel entry, sidecar arrays)`` of an exported bound kernel, every digest checked.

    ``check_entry(path, entry)`` raises ``ValueError`` when the manifest's ``kernel`` entry is not the
    kind the caller loads (it runs before the structure is read); the sizes are checked to be
    non-negative ints. The caller checks the structure itself against the function's signature."""
    path = Path(path).absolute()  # not resolve(): a bundle links each sidecar beside the library
    function = CompiledFunction(path, verify=True)
    kernel = function.manifest.get("kernel")
    check_entry(path, kernel)
    npz = sidecar(path, ".npz")
    if not npz.exists():
        raise FileNotFoundError(f"{npz} (the kernel's structure) is missing")
    check_digest(npz, function.manifest.get(SIDECAR_SHA256), "structure sidecar")
    try:
        with np.load(npz, allow_pickle=False) as loaded:
            arrays = {name: loaded[name] for name in loaded.files}
    except (OSError, ValueError, EOFError) as error:
        raise ValueError(f"{npz} is not a readable structure sidecar: {error}") from None
    arrays = _decode_bfloat16(arrays, npz)
    sizes = kernel.get("sizes")
    if not isinstance(sizes, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                              for v in sizes.values()):
        raise ValueError(f"{path}: the manifest's sizes must be non-negative ints, got {sizes!r}")
    return function, kernel, arrays


def _encode_bfloat16(arrays: dict) -> dict:
    """``arrays`` with every bfloat16 array as its uint16 bits, named in :data:`BFLOAT16_ARRAYS`."""
    names = sorted(name for name, array in arrays.items() if array.dtype.name == "bfloat16")
    if not names:
        return arrays
    encoded = {name: array.view(np.uint16) if name in names else array for name, array in arrays.items()}
    encoded[BFLOAT16_ARRAYS] = np.array(names, dtype=str)
    return encoded


def _decode_bfloat16(arrays: dict, npz: Path) -> dict:
    """The inverse of :func:`_encode_bfloat16`, checked: each listed array exists as uint16 bits, and
    no array is left with a dtype numpy cannot name (``void``), which nothing downstream could use."""
    names = arrays.pop(BFLOAT16_ARRAYS, None)
    raw = [name for name, array in arrays.items() if array.dtype.kind == "V"]  # before bfloat16 (kind V too)
    if raw:
        raise ValueError(f"{npz}: arrays {raw} have no numeric dtype (an export older than the bfloat16 "
                         "encoding?); export the kernel again")
    if names is not None:
        if names.ndim != 1 or names.dtype.kind != "U":
            raise ValueError(f"{npz}: {BFLOAT16_ARRAYS} must list array names, got {names.dtype} {names.shape}")
        for name in names.tolist():
            if name not in arrays or arrays[name].dtype != np.uint16:
                raise ValueError(f"{npz}: {BFLOAT16_ARRAYS} names {name!r}, which is not a uint16 array of the "
                                 "sidecar; export the kernel again")
            arrays[name] = arrays[name].view(numpy_dtype("bfloat16"))
    return arrays


def empty_like(reference, shape, dtype):
    """An uninitialised array of ``shape``: a torch tensor on ``reference``'s device for a torch
    ``reference``, else an aligned numpy array."""
    if is_torch(reference):
        import torch  # noqa: PLC0415 - torch loads only for torch inputs (the runtime runs numpy without it)

        return torch.empty(shape, dtype=getattr(torch, dtype), device=reference.device)
    return aligned_empty(shape, dtype)


def host(array):
    """A numpy array of ``array`` (a torch tensor is copied to the host)."""
    if isinstance(array, np.ndarray):
        return array
    array = array.detach().cpu()
    if str(array.dtype) == "torch.bfloat16":  # torch has no numpy bfloat16: hand its bits over
        import torch  # noqa: PLC0415 - torch loads only for torch inputs

        return array.view(torch.int16).numpy().view(numpy_dtype("bfloat16"))
    return array.numpy()
