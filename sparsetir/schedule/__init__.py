"""Schedule templates over ``tvm.s_tir.Schedule`` with named, registered knobs (``cpu.py``, ``cuda.py``, ``knobs.py``)."""

from __future__ import annotations

from .cpu import schedule_cpu
from .cuda import schedule_cuda
from .knobs import DEVICES, Knob, knob, knob_names, knob_settings, register_knob, split_knobs

TEMPLATES = {"cpu": schedule_cpu, "cuda": schedule_cuda}


def schedule(func, device: str, **knobs):
    """Apply the template of ``device`` ("cpu" or "cuda") to a Stage III PrimFunc; returns the IRModule.

    ``knobs`` are that template's (``knob_names(device, "schedule")``); an unknown name raises
    ``TypeError``, a bad value ``ValueError``.
    """
    if device not in TEMPLATES:
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return TEMPLATES[device](func, **knobs)


__all__ = ["DEVICES", "Knob", "TEMPLATES", "knob", "knob_names", "knob_settings", "register_knob", "schedule",
           "schedule_cpu", "schedule_cuda", "split_knobs"]
