"""Build a scheduled TVM module into a CUDA kernel library (``.so`` with an embedded fatbin).

The work happens in a child process (``sparsetir.backend.cuda_worker``) so that a build-only
``libcuda.so.1`` stub can be loaded there on GPU-less hosts without touching this process.
The library holds SASS for every requested arch plus PTX for the first one, and loads in a
process that has only the TVM runtime.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sparsetir.backend.fatbin import FatbinEntry

DEFAULT_ARCHS = ("sm_90", "sm_80")
# Atomic max/min of floats (lower_sparse_buffer.atomic_update), on the float's bit pattern: for
# a value >= 0 the signed-int order of the bits is the float order (and every negative float's
# bits are a negative int); for a value < 0 the unsigned order is the reverse float order (and
# every non-negative float's bits are a smaller unsigned). Compiled in before the kernels.
ATOMIC_HELPERS = r"""
// A NaN value is stored as the NaN that every later update keeps: +NaN's bits are above every float's
// in the signed (max) compare, and -NaN's in both of min's compares (docs/nan-semantics.md).
__device__ __forceinline__ float sparsetir_atomic_max(float* address, float value) {
  if (value != value) return atomicExch(address, __uint_as_float(0x7fc00000u));
  return value >= 0.0f ? __int_as_float(atomicMax((int*)address, __float_as_int(value)))
                       : __uint_as_float(atomicMin((unsigned int*)address, __float_as_uint(value)));
}
__device__ __forceinline__ float sparsetir_atomic_min(float* address, float value) {
  if (value != value) return atomicExch(address, __uint_as_float(0xffc00000u));
  return value >= 0.0f ? __int_as_float(atomicMin((int*)address, __float_as_int(value)))
                       : __uint_as_float(atomicMax((unsigned int*)address, __float_as_uint(value)));
}
__device__ __forceinline__ double sparsetir_atomic_max(double* address, double value) {
  if (value != value)
    return __longlong_as_double((long long)atomicExch((unsigned long long*)address, 0x7ff8000000000000ull));
  return value >= 0.0 ? __longlong_as_double(atomicMax((long long*)address, __double_as_longlong(value)))
                      : __longlong_as_double((long long)atomicMin((unsigned long long*)address,
                                                                  (unsigned long long)__double_as_longlong(value)));
}
__device__ __forceinline__ double sparsetir_atomic_min(double* address, double value) {
  if (value != value)
    return __longlong_as_double((long long)atomicExch((unsigned long long*)address, 0xfff8000000000000ull));
  return value >= 0.0 ? __longlong_as_double(atomicMin((long long*)address, __double_as_longlong(value)))
                      : __longlong_as_double((long long)atomicMax((unsigned long long*)address,
                                                                  (unsigned long long)__double_as_longlong(value)));
}
"""


def with_atomic_helpers(code: str) -> str:
    """``code`` with ``ATOMIC_HELPERS`` before its first kernel, where a kernel calls one of them."""
    if "sparsetir_atomic_" not in code:
        return code
    at = code.find('extern "C" __global__')
    return code + ATOMIC_HELPERS if at < 0 else code[:at] + ATOMIC_HELPERS + "\n" + code[at:]
DEFAULT_TIMEOUT_S = 600.0


@dataclass
class CudaBuildResult:
    """What :func:`build_cuda` produced.

    ``archs`` are the SASS archs actually built (an arch nvcc rejected is named in ``notes``);
    ``seconds`` is the wall time of the whole build, child process included.
    """

    so_path: Path
    source: str
    fatbin_entries: list[FatbinEntry]
    source_path: Path | None = None
    archs: list[str] = field(default_factory=list)
    gencode: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def find_nvcc() -> str | None:
    """Path of nvcc: ``$PATH``, then ``$CUDA_HOME``/``$CUDA_PATH``, then ``/usr/local/cuda*``."""
    found = shutil.which("nvcc")
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    homes += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    for home in homes:
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            return os.path.join(home, "bin", "nvcc")
    return None


def nvcc_available() -> tuple[bool, str]:
    """(True, path) when nvcc runs; otherwise (False, why not)."""
    nvcc = find_nvcc()
    if nvcc is None:
        return False, "nvcc not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda*/bin"
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"{nvcc} does not run: {err}"
    if proc.returncode != 0:
        return False, f"{nvcc} --version failed: {proc.stderr.strip()}"
    return True, nvcc


def _child_env(nvcc: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(nvcc).parent) + os.pathsep + env.get("PATH", "")
    env["TVM_CUDA_COMPILE_MODE"] = "nvcc"
    project_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = project_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def cuda_source(mod, target: dict | None = None) -> str:
    """The CUDA C that TVM generates for a scheduled module, in this process, without nvcc or a GPU.

    Where TVM's CUDA runtime is loaded, the nvcc/NVRTC callback is replaced for the duration of
    the call by one that only records the code, so nothing is compiled either way.
    """
    import tvm  # noqa: PLC0415 - tvm loads on first build, after the CUDA build stub (backend/cuda_stub.py)
    import tvm.support.nvcc  # noqa: F401, PLC0415 - registers the default callback we swap out
    import tvm_ffi  # noqa: PLC0415 - with tvm

    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = tvm.IRModule({"main": mod})
    name = "tvm_callback_cuda_compile"
    original = tvm_ffi.get_global_func(name, allow_missing=True)
    seen: list[str] = []

    def record_only(code, *_):
        seen.append(code)
        return bytearray(b"\0")

    tvm_ffi.register_global_func(name, record_only, override=True)
    try:
        with tvm.target.Target(target or {"kind": "cuda", "arch": DEFAULT_ARCHS[0]}) as tgt:
            executable = tvm.compile(mod, target=tgt)
    finally:
        if original is not None:
            tvm_ffi.register_global_func(name, original, override=True)
    if seen:
        return "\n".join(seen)
    device = [m for m in executable.mod.imports if m.kind == "cuda"]
    if not device:
        raise RuntimeError("the module has no CUDA device code; are its loops bound to blockIdx/threadIdx?")
    return "\n".join(m.inspect_source("cuda") for m in device)


def build_cuda(
    mod,
    out_dir,
    archs=DEFAULT_ARCHS,
    target_extra: dict | None = None,
    *,
    name: str = "kernel",
    ptx: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CudaBuildResult:
    """Compile a scheduled ``tvm.IRModule`` (or PrimFunc) for CUDA into ``out_dir/<name>.so``.

    The target is ``{"kind": "cuda", "arch": archs[0], **target_extra}``.  Writes
    ``<name>.so``, ``<name>.cu`` (the generated CUDA C) and ``<name>.so.json`` (build record).
    Raises ``RuntimeError`` when nvcc is missing or the build fails (with the worker's stderr),
    and ``subprocess.TimeoutExpired`` is turned into ``RuntimeError`` too.
    """
    import tvm  # noqa: PLC0415 - the compiler is only needed to serialise the module

    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = tvm.IRModule({name: mod})
    archs = [str(a) for a in archs]
    if not archs or not all(a.startswith("sm_") for a in archs):
        raise ValueError(f"archs must be a non-empty list like ['sm_90', 'sm_80'], got {archs!r}")
    ok, nvcc = nvcc_available()
    if not ok:
        raise RuntimeError(f"cannot build for CUDA: {nvcc}")
    target = {"kind": "cuda", "arch": archs[0], **(target_extra or {})}

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    so_path = out_dir / f"{name}.so"
    result_json = out_dir / f"{name}.so.json"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sparsetir-cuda-") as tmp:
        module_json = Path(tmp) / "module.json"
        module_json.write_text(tvm.ir.save_json(mod))
        request = {
            "module_json": str(module_json),
            "target": target,
            "output": str(so_path),
            "archs": archs,
            "ptx": ptx,
            "nvcc": nvcc,
            "result_json": str(result_json),
        }
        request_path = Path(tmp) / "request.json"
        request_path.write_text(json.dumps(request, indent=2))
        cmd = [sys.executable, "-m", "sparsetir.backend.cuda_worker", str(request_path)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=_child_env(nvcc))
        except subprocess.TimeoutExpired as err:
            raise RuntimeError(f"CUDA build of {name!r} timed out after {timeout_s:.0f} s") from err
    if proc.returncode != 0:
        raise RuntimeError(
            f"CUDA build of {name!r} failed (worker exit {proc.returncode}):\n{proc.stderr.strip()}"
        )
    record = json.loads(result_json.read_text())
    source_path = Path(record["source_path"])
    return CudaBuildResult(
        so_path=Path(record["so_path"]),
        source=source_path.read_text(),
        fatbin_entries=[FatbinEntry(**{**e, "version": tuple(e["version"])}) for e in record["entries"]],
        source_path=source_path,
        archs=record["archs"],
        gencode=record["gencode"],
        notes=record["notes"],
        seconds=time.perf_counter() - start,
    )
