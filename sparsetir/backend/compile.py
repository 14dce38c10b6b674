"""Compile a scheduled module for LLVM or CUDA into a cached :class:`CompiledFunction`.

A cached entry is used only after :func:`~sparsetir.backend.cache.entry_problem` finds it
intact (the manifest records the library's size and sha256); a damaged one is rebuilt.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..runtime.function import MANIFEST_FORMAT, CompiledFunction, sidecar
from ..version import __version__
from .cache import discard_entry, entry_dir, entry_key, entry_problem, library_record, publish
from .target import device_of

LIBRARY = "kernel.so"
#: Part of every entry key: entries written before manifests recorded the library's digest are not reused.
CACHE_LAYOUT = 2
#: Rebuilds of one entry before giving up (another process may replace it at the same moment).
_ATTEMPTS = 3
_compiled: dict[str, CompiledFunction] = {}


def compile_module(mod, target: dict) -> CompiledFunction:
    """Compile (or fetch from the cache) the single PrimFunc of a scheduled IRModule."""
    import tvm  # noqa: PLC0415 - tvm loads on first build, after the CUDA build stub (backend/cuda_stub.py)

    (global_var,) = mod.functions.keys()
    name = global_var.name_hint
    key = entry_key(mod.script(), target, tvm.__version__, __version__, MANIFEST_FORMAT, CACHE_LAYOUT)
    if key in _compiled:
        return _compiled[key]
    library = entry_dir(key) / LIBRARY
    problem = entry_problem(library)
    for _attempt in range(_ATTEMPTS):
        if problem is None:
            break
        if entry_dir(key).exists():  # present but damaged (an absent entry is simply built)
            discard_entry(key, problem)
        publish(key, lambda folder: _compile_into(folder, mod, name, target))
        library = entry_dir(key) / LIBRARY  # in the private cache if the cache folder turned out read-only
        problem = entry_problem(library)
    if problem is not None:
        raise RuntimeError(f"the kernel cache entry {entry_dir(key)} is still damaged after {_ATTEMPTS} builds: "
                           f"{problem}")
    function = CompiledFunction(library)
    _compiled[key] = function
    return function


def _compile_into(folder: Path, mod, name: str, target: dict) -> None:
    import tvm  # noqa: PLC0415 - tvm loads on first build, after the CUDA build stub (backend/cuda_stub.py)

    from ..lower import SIGNATURE_ATTR  # noqa: PLC0415 - the front end loads on first build (backend/__init__.py)

    library = folder / LIBRARY
    manifest = {
        "format": MANIFEST_FORMAT,
        "name": name,
        "device": device_of(target),
        "target": target,
        "signature": json.loads(str(mod[name].attrs[SIGNATURE_ATTR])),
        "versions": {"tvm": tvm.__version__},
    }
    if target["kind"] == "cuda":
        from .cuda import build_cuda  # noqa: PLC0415 - CUDA builds only; it loads the CUDA stub first

        result = build_cuda(mod, folder / "cuda-build", archs=_cuda_archs(target))
        shutil.move(str(result.so_path), library)
        sidecar(library, ".cu").write_text(result.source)
        manifest["source_suffix"] = ".cu"
        manifest["fatbin"] = [f"{e.kind} {e.arch}" for e in result.fatbin_entries]
        shutil.rmtree(folder / "cuda-build", ignore_errors=True)
    else:
        executable = tvm.compile(mod, target=tvm.target.Target(target))
        executable.export_library(str(library))
        sidecar(library, ".ll").write_text(executable.mod.inspect_source("ll"))
        manifest["source_suffix"] = ".ll"
    manifest.update(library_record(library))
    sidecar(library, ".json").write_text(json.dumps(manifest, indent=1))


def _cuda_archs(target: dict) -> tuple:
    arch = target.get("arch", "sm_90")
    return (arch, "sm_80") if arch == "sm_90" else (arch,)
