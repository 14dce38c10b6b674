"""Schedule templates over ``tvm.s_tir.Schedule`` with named, registered knobs (``cpu.py``, ``cuda.py``, ``knobs.py``)."""

from __future__ import annotations

from .attention import schedule_attention_cpu
from .attention_cuda import schedule_attention_cuda
from .cpu import schedule_cpu
from .cuda import schedule_cuda
from .knobs import DEVICES, Knob, knob, knob_names, knob_settings, register_knob, split_knobs

#: device -> the template a plain sparse iteration gets; ``ATTENTION_TEMPLATES``: block-sparse attention's
TEMPLATES = {"cpu": schedule_cpu, "cuda": schedule_cuda}
ATTENTION_TEMPLATES = {"cpu": schedule_attention_cpu, "cuda": schedule_attention_cuda}


def schedule(func, device: str, **knobs):
    """Apply the template of ``device`` ("cpu" or "cuda") to a Stage III PrimFunc; returns the IRModule.

    ``knobs`` are that template's (``knob_names(device, "schedule")``); an unknown name raises
    ``TypeError``, a bad value ``ValueError``.
    """
    if device not in TEMPLATES:
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return TEMPLATES[device](func, **knobs)


def schedule_attention(func, device: str, *, structure: dict, **settings):
    """Schedule the Stage III attention function for ``device`` (``ATTENTION_TEMPLATES``); returns the module.

    ``structure``: the kernel's structure arrays by parameter name (the row-fused variant sizes
    each block row's buffers for the longest row); ``settings``: ``attention.attention_settings``.
    """
    if device not in ATTENTION_TEMPLATES:
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return ATTENTION_TEMPLATES[device](func, structure=structure, **settings)


__all__ = ["ATTENTION_TEMPLATES", "DEVICES", "Knob", "TEMPLATES", "knob", "knob_names", "knob_settings", "register_knob",
           "schedule", "schedule_attention", "schedule_cpu", "schedule_cuda", "split_knobs"]
