"""Backend: Stage I function -> lowered, scheduled, compiled and cached :class:`CompiledFunction`."""

from __future__ import annotations

from .compile import compile_module
from .target import device_of, normalize_target


def scheduled_module(func, target="llvm", *, specialize=None, **knobs):
    """Lower a Stage I function, bind ``specialize`` sizes to constants, and apply the target's
    schedule template; returns the IRModule."""
    # the compiler front end loads on first build: importing sparsetir.backend must not load tvm
    # before the CUDA build stub (backend/cuda_stub.py), which a CUDA build worker preloads
    from ..ir import SparseFunction  # noqa: PLC0415
    from ..lower import lower  # noqa: PLC0415
    from ..schedule import schedule  # noqa: PLC0415
    from ..transform import specialize as bind_sizes  # noqa: PLC0415
    from ..transform import widen_accumulation  # noqa: PLC0415

    if not isinstance(func, SparseFunction):
        raise TypeError(f"expected a sparsetir.ir.SparseFunction, got {type(func).__name__}")
    prim = lower(widen_accumulation(func))
    if specialize:
        prim = bind_sizes(prim, specialize)
    return schedule(prim, device_of(normalize_target(target)), **knobs)


def build(func, target="llvm", *, specialize=None, **knobs):
    """Compile any Stage I function written with the public IR API.

    Parameters
    ----------
    func : sparsetir.ir.SparseFunction
        The Stage I function (axes, sparse buffers, sparse iterations).
    target : str or dict
        ``"llvm"``, ``"cuda"`` or a TVM target dict.
    specialize : dict, optional
        ``{size name: value}``: sizes compiled as constants.
    **knobs
        The schedule template's knobs for the target's device (``sparsetir.schedule.knob_names``).

    Returns
    -------
    CompiledFunction
        Called with arrays by parameter name (``fn(A=..., B=..., ...)``); it validates every
        input first. Cached on disk by the scheduled module and target.
    """
    target = normalize_target(target)
    return compile_module(scheduled_module(func, target, specialize=specialize, **knobs), target)


__all__ = ["build", "compile_module", "device_of", "normalize_target", "scheduled_module"]
