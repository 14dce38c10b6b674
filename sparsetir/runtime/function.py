"""A compiled function: a kernel library on disk plus its manifest (signature, target, source).

An exported function is ``<path>`` (the library), ``<path>.json`` (the manifest)
and ``<path>.<source suffix>`` (the generated source); it loads with only the
TVM runtime. The compile cache keeps the same three files in one folder.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from .loader import load_module
from .manifest import (
    LIBRARY_BYTES,
    LIBRARY_SHA256,
    MANIFEST_FORMAT,
    SIDECAR_SHA256,
    read_export_manifest,
    write_export_manifest,
)
from .marshal import Marshalled, is_torch, kernel_argument
from .signature import Signature

__all__ = ["LIBRARY_SHA256", "MANIFEST_FORMAT", "SIDECAR_SHA256", "CompiledFunction", "check_digest", "file_sha256",
           "sidecar"]


def sidecar(library: Path, suffix: str) -> Path:
    return library.with_name(library.name + suffix)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_digest(path: Path, expected: str, what: str) -> None:
    """``path``'s sha256 is ``expected`` (required: an export's manifest records every digest); a
    ValueError naming ``what`` otherwise."""
    if not isinstance(expected, str):
        raise ValueError(f"{path}: its manifest records no sha256 for the {what}; export the kernel again")
    if file_sha256(path) != expected:
        raise ValueError(f"{path} does not match the sha256 its manifest records for the {what}: the file was "
                         "changed or damaged after export; export the kernel again")


class CompiledFunction:
    """Call with arrays by parameter name (or position); sizes are read off the shapes."""

    def __init__(self, library, *, verify: bool = False):
        self.library = Path(library).absolute()  # later calls may run from another working directory
        manifest_path = sidecar(self.library, ".json")
        if not self.library.exists() or not manifest_path.exists():
            raise FileNotFoundError(f"{self.library} or its manifest {manifest_path.name} is missing")
        if verify:  # an export read back: the sealed manifest's schema, then the library it describes
            manifest = read_export_manifest(manifest_path)
            if self.library.stat().st_size != manifest[LIBRARY_BYTES]:
                raise ValueError(f"{self.library} has {self.library.stat().st_size} bytes but its manifest records "
                                 f"{manifest[LIBRARY_BYTES]} (field {LIBRARY_BYTES!r}): the library is truncated or "
                                 "was replaced; export the kernel again")
            check_digest(self.library, manifest[LIBRARY_SHA256], "library")
        else:
            try:
                manifest = json.loads(manifest_path.read_text())
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                raise ValueError(f"{manifest_path} is not a readable manifest: {error}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
            found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
            raise ValueError(f"{self.library} is not a sparsetir compiled function ({found})")
        missing = [key for key in ("name", "device", "signature", "source_suffix") if key not in manifest]
        if missing:
            raise ValueError(f"{manifest_path} lacks {missing}")
        self.manifest = manifest
        self.name: str = manifest["name"]
        self.device: str = manifest["device"]
        self.signature = Signature(manifest["signature"])
        self._function = None

    @property
    def source(self) -> str:
        """Generated source: CUDA C for CUDA, LLVM IR of the host code for LLVM."""
        return sidecar(self.library, self.manifest["source_suffix"]).read_text()

    def __call__(self, *args, **kwargs):
        """Validate every input (shapes, dtypes, axis metadata), then run the kernel."""
        bound = self.signature.bind(args, kwargs)
        sizes = self.signature.infer_sizes(bound)
        self.signature.check(bound, sizes)
        self.invoke(bound, sizes)

    def invoke(self, bound: dict, sizes: dict, prepared: dict | None = None) -> None:
        """Run without validation (callers that validated once, like Kernel).

        ``prepared`` holds arguments already converted with :meth:`prepare` (a Kernel's fixed
        structure), which skip marshalling on every call.
        """
        kernel = self.kernel()  # for CUDA, a clear RuntimeError where no GPU is present
        prepared = prepared or {}
        self._check_devices(bound)
        call = Marshalled()
        for param in self.signature.params:
            name = param["name"]
            if name in prepared:
                call.args.append(prepared[name])
            elif param["role"] == "size":
                call.args.append(int(sizes[name]))
            else:
                call.add(bound[name], output=name in self.signature.outputs)
        kernel(*call.args)
        call.finish()

    def prepare(self, bound: dict, sizes: dict) -> dict:
        """Convert inputs that stay fixed across calls (and the sizes) once, for :meth:`invoke`."""
        self._check_devices(bound)
        prepared = {}
        for param in self.signature.params:
            name = param["name"]
            if param["role"] == "size":
                prepared[name] = int(sizes[name])
            elif name in bound:
                if name in self.signature.outputs:
                    raise ValueError(f"{name} is an output; it cannot be fixed across calls")
                prepared[name] = kernel_argument(bound[name])[0]
        return prepared

    def kernel(self):
        """The loaded kernel entry point (loads the library on first use)."""
        if self._function is None:
            self._function = load_module(self.library, self.device)[self.name]
        return self._function

    def _check_devices(self, bound: dict) -> None:
        for name, array in bound.items():
            if not hasattr(array, "shape"):
                continue
            on_cuda = is_torch(array) and array.is_cuda
            if on_cuda != (self.device == "cuda"):
                where = "a CUDA tensor" if on_cuda else "host memory"
                raise ValueError(f"{name} is {where}, but {self.name} runs on {self.device}")

    def export(self, path, **extra) -> Path:
        """Write the library to ``path`` with its manifest (plus ``extra`` entries and the library's
        sha256, which ``runtime.load`` verifies) and source beside it."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.library, path)
        extra = {LIBRARY_SHA256: file_sha256(path), LIBRARY_BYTES: path.stat().st_size, **extra}
        suffix = self.manifest["source_suffix"]
        shutil.copyfile(sidecar(self.library, suffix), sidecar(path, suffix))
        write_export_manifest(sidecar(path, ".json"), {**self.manifest, **extra})
        return path

    def __repr__(self) -> str:
        return f"CompiledFunction({self.name}, {self.device}, {self.library})"
