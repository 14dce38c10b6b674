"""Schedule templates over ``tvm.s_tir.Schedule`` with named knobs (``cpu.py``, ``cuda.py``)."""

from __future__ import annotations

from .cpu import CPU_KNOBS, schedule_cpu
from .cuda import CUDA_KNOBS, schedule_cuda

KNOBS = {"cpu": CPU_KNOBS, "cuda": CUDA_KNOBS}


def schedule(func, device: str, **knobs):
    """Apply the template of ``device`` ("cpu" or "cuda") to a Stage III PrimFunc; returns the IRModule."""
    if device not in KNOBS:
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    unknown = sorted(set(knobs) - set(KNOBS[device]))
    if unknown:
        raise TypeError(f"unknown {device} schedule knob(s) {unknown}; valid: {list(KNOBS[device])}")
    return (schedule_cpu if device == "cpu" else schedule_cuda)(func, **knobs)


__all__ = ["CPU_KNOBS", "CUDA_KNOBS", "KNOBS", "schedule", "schedule_cpu", "schedule_cuda"]
