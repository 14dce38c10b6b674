"""Subprocess that compiles one scheduled IRModule to a CUDA kernel library with a real fatbin.

Run as ``python -m sparsetir.backend.cuda_worker REQUEST.json`` (``sparsetir.backend.cuda`` does this).
It runs in a fresh process because the driver stub must be in place before TVM's CUDA runtime
library is loaded, and must never leak into a process that may later want a real GPU.

Request (JSON object)::

    module_json   path of the module written with tvm.ir.save_json
    target        TVM target dict, {"kind": "cuda", "arch": "sm_90", ...}
    output        path of the .so to write (the CUDA C source goes next to it as .cu)
    archs         SASS targets, first = primary, e.g. ["sm_90", "sm_80"]
    ptx           embed PTX for the primary arch (default true)
    nvcc          optional path of nvcc
    result_json   optional path for the result record (default: <output>.json)

Exit status 0 means the library exists and its fatbin holds ELF entries for every arch in the
result's ``archs`` (an arch nvcc rejects is dropped and named in ``notes``).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from sparsetir.backend import cuda_stub
from sparsetir.backend.cuda import with_atomic_helpers
from sparsetir.backend.fatbin import fatbin_entries


class CudaBuildError(RuntimeError):
    """The CUDA build did not produce a library with real device code."""


def _load_cuda_runtime_library() -> None:
    """Make sure TVM's CUDA module factory is registered, loading the sidecar library if needed.

    ``import tvm`` loads ``libtvm_runtime_cuda.so`` only if ``libcuda.so.1`` resolves at that
    moment; if the stub arrived later (e.g. tvm was imported by a package ``__init__``), load it
    now: its global registrations happen on load.
    """
    import tvm_ffi  # noqa: PLC0415 - after the CUDA stub is preloaded (main)
    from tvm.base import _LOADED_LIBS  # noqa: PLC0415 - after the CUDA stub is preloaded (main)

    if tvm_ffi.get_global_func("ffi.Module.create.cuda", allow_missing=True) is not None:
        return
    runtime_dir = Path(_LOADED_LIBS["tvm_runtime"]._name).resolve().parent
    sidecar = runtime_dir / "libtvm_runtime_cuda.so"
    try:
        ctypes.CDLL(str(sidecar), mode=ctypes.RTLD_GLOBAL)
    except OSError as err:
        raise CudaBuildError(f"cannot load {sidecar}: {err}") from err
    if tvm_ffi.get_global_func("ffi.Module.create.cuda", allow_missing=True) is None:
        raise CudaBuildError(
            f"{sidecar} loaded but 'ffi.Module.create.cuda' is not registered; TVM would embed "
            "CUDA source instead of a fatbin"
        )


def supported_gpu_codes(nvcc: str) -> set[str]:
    """The ``sm_XX`` codes this nvcc can emit (``nvcc --list-gpu-code``)."""
    proc = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return set()
    return {line.strip() for line in proc.stdout.split() if line.strip().startswith("sm_")}


def gencode_flags(archs: list[str], ptx: bool) -> list[str]:
    """nvcc ``-gencode`` flags: SASS for every arch, plus PTX of the first (primary) one."""
    flags = []
    for i, arch in enumerate(archs):
        number = arch.removeprefix("sm_")
        code = f"[sm_{number},compute_{number}]" if (ptx and i == 0) else f"sm_{number}"
        flags += ["-gencode", f"arch=compute_{number},code={code}"]
    return flags


def compile_with_fallback(code: str, archs: list[str], ptx: bool, notes: list[str], compile_fn):
    """``compile_fn(code, gencode_flags)`` for all archs; if that fails, for the primary arch alone.

    On fallback, ``archs`` is cut down to its first element in place and the reason is added to
    ``notes``.  Returns ``(binary, flags used)``.
    """
    flags = gencode_flags(archs, ptx)
    try:
        return compile_fn(code, flags), flags
    except RuntimeError as err:
        if len(archs) == 1:
            raise
        notes.append(
            f"nvcc failed for {archs}; retried with {archs[0]} only. nvcc said:\n"
            + _first_lines(str(err).split("Compilation error:")[-1])
        )
        del archs[1:]
        flags = gencode_flags(archs, ptx)
        return compile_fn(code, flags), flags


def _first_lines(text: str, limit: int = 12) -> str:
    lines = [ln for ln in text.splitlines() if "error" in ln.lower()] or text.splitlines()[-limit:]
    return "\n".join(lines[:limit])


def build(request: dict) -> dict:
    """Compile, export and verify; returns the result record (also written to ``result_json``)."""
    output = Path(request["output"]).resolve()
    archs = list(request.get("archs") or ["sm_90"])
    ptx = bool(request.get("ptx", True))
    nvcc = request.get("nvcc") or "nvcc"
    notes: list[str] = []

    if Path(nvcc).is_absolute():
        os.environ["PATH"] = str(Path(nvcc).parent) + os.pathsep + os.environ.get("PATH", "")
    os.environ.setdefault("TVM_CUDA_COMPILE_MODE", "nvcc")

    supported = supported_gpu_codes(nvcc)
    if supported:
        dropped = [a for a in archs if a not in supported]
        if archs[0] in dropped:
            raise CudaBuildError(f"nvcc cannot emit the primary arch {archs[0]} (it supports {sorted(supported)})")
        if dropped:
            notes.append(f"nvcc does not support {dropped}; built {[a for a in archs if a not in dropped]} only")
            archs = [a for a in archs if a not in dropped]

    # The stub must be loaded before libtvm_runtime_cuda.so, hence before `import tvm` if possible.
    stub = cuda_stub.preload_stub()
    import tvm  # noqa: PLC0415 - after the stub, above
    import tvm.support.nvcc as tvm_nvcc  # noqa: PLC0415 - registers TVM's default callback; ours overrides it
    import tvm_ffi  # noqa: PLC0415 - after the stub, above

    _load_cuda_runtime_library()

    used = {"gencode": None, "calls": 0}

    def nvcc_fatbin(code, flags):
        return tvm_nvcc.compile_cuda(code, target_format="fatbin", arch=flags, compiler="nvcc")

    def compile_callback(code, *_):
        used["calls"] += 1
        code = with_atomic_helpers(code)
        binary, used["gencode"] = compile_with_fallback(code, archs, ptx, notes, nvcc_fatbin)
        return binary

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", compile_callback, override=True)

    try:
        mod = tvm.ir.load_json(Path(request["module_json"]).read_text())
    except OSError as err:
        raise CudaBuildError(f"cannot read the module: {err}") from err
    target = dict(request["target"])
    target.setdefault("kind", "cuda")
    target.setdefault("arch", archs[0])
    if target["arch"] != archs[0]:
        raise CudaBuildError(f"target arch {target['arch']} differs from the primary arch {archs[0]}")

    t0 = time.perf_counter()
    with tvm.target.Target(target) as tgt:
        executable = tvm.compile(mod, target=tgt)
    compile_s = time.perf_counter() - t0

    device_mods = [m for m in executable.mod.imports if m.kind == "cuda"]
    if not device_mods:
        raise CudaBuildError(
            "the compiled module has no CUDA device code; are the loops bound to blockIdx/threadIdx?"
        )
    if used["calls"] == 0 or not all(m.is_runnable() for m in device_mods):
        raise CudaBuildError(
            "TVM fell back to a source-only CUDA module (nvcc callback not run); the exported "
            "library would carry CUDA source, not a fatbin. Is libtvm_runtime_cuda.so loadable?"
        )

    output.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    executable.export_library(str(output))
    export_s = time.perf_counter() - t0
    source = "\n".join(m.inspect_source("cuda") for m in device_mods)
    source_path = output.with_suffix(".cu")
    source_path.write_text(source)

    entries = fatbin_entries(output)
    elf_archs = {e.arch for e in entries if e.kind == "ELF"}
    missing = [a for a in archs if a not in elf_archs]
    if not entries or missing:
        raise CudaBuildError(
            f"{output} holds no SASS for {missing or archs} (fatbin entries found: "
            f"{[(e.kind, e.arch) for e in entries]}); TVM may have embedded CUDA source instead"
        )
    if ptx and not any(e.kind == "PTX" for e in entries):
        raise CudaBuildError(f"{output}: PTX for {archs[0]} was requested but is not in the fatbin")

    return {
        "so_path": str(output),
        "source_path": str(source_path),
        "archs": archs,
        "ptx": ptx,
        "gencode": used["gencode"],
        "notes": notes,
        "entries": [asdict(e) for e in entries],
        "compile_s": compile_s,
        "export_s": export_s,
        "stub": str(stub) if stub else None,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m sparsetir.backend.cuda_worker REQUEST.json", file=sys.stderr)
        return 2
    try:
        request = json.loads(Path(argv[0]).read_text())
        missing = [key for key in ("module_json", "target", "output") if key not in request]
        if missing:
            raise ValueError(f"it lacks {missing}")
    except (OSError, ValueError) as err:
        print(f"sparsetir.backend.cuda_worker: error: cannot read request {argv[0]}: {err}", file=sys.stderr)
        return 2
    try:
        result = build(request)
    except CudaBuildError as err:
        print(f"sparsetir.backend.cuda_worker: error: {err}", file=sys.stderr)
        return 1
    except Exception:  # report anything else with its traceback, still as a clean failure
        print("sparsetir.backend.cuda_worker: error: unexpected failure\n" + traceback.format_exc(), file=sys.stderr)
        return 1
    result_json = Path(request.get("result_json") or str(request["output"]) + ".json")
    result_json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
