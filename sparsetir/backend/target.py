"""Target normalisation: ``"llvm"``, ``"cuda"`` or a TVM target dict -> a target dict.

TVM 0.27 rejects CLI target strings, and ``-mcpu=native`` falls back to a generic
CPU with its conda triple, so ``"llvm"`` names the host CPU explicitly.
"""

from __future__ import annotations

from functools import cache

from ..runtime.loader import usable_cores

DEFAULT_CUDA_ARCH = "sm_90"


@cache
def host_cpu() -> str:
    from tvm.target import codegen  # noqa: PLC0415 - tvm loads on first build, after the CUDA build stub (backend/cuda_stub.py)

    return str(codegen.llvm_get_system_cpu())


def normalize_target(target) -> dict:
    """A TVM target dict for ``target``; kinds other than llvm and cuda are refused."""
    if isinstance(target, str):
        if target == "llvm":
            return {"kind": "llvm", "mcpu": host_cpu(), "num-cores": usable_cores()}
        if target == "cuda":
            return {"kind": "cuda", "arch": DEFAULT_CUDA_ARCH}
        raise ValueError(f"target must be 'llvm', 'cuda' or a TVM target dict, got {target!r}")
    if hasattr(target, "export") and not isinstance(target, dict):  # a tvm.target.Target
        target = dict(target.export())
    if not isinstance(target, dict):
        raise TypeError(f"target must be 'llvm', 'cuda' or a dict, got {type(target).__name__}")
    kind = target.get("kind")
    if kind not in ("llvm", "cuda"):
        raise ValueError(f"target kind must be 'llvm' or 'cuda', got {kind!r}")
    target = dict(target)
    if kind == "cuda":
        target.setdefault("arch", DEFAULT_CUDA_ARCH)
    return target


def device_of(target: dict) -> str:
    return "cuda" if target["kind"] == "cuda" else "cpu"
