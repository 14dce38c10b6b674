"""Backend: Stage I function -> lowered, scheduled, compiled and cached :class:`CompiledFunction`."""

from __future__ import annotations

from .compile import compile_module
from .target import device_of, normalize_target


def scheduled_module(func, target="llvm", **knobs):
    """Lower a Stage I function and apply the target's schedule template; returns the IRModule."""
    from ..ir import SparseFunction
    from ..lower import lower
    from ..schedule import schedule

    if not isinstance(func, SparseFunction):
        raise TypeError(f"expected a sparsetir.ir.SparseFunction, got {type(func).__name__}")
    return schedule(lower(func), device_of(normalize_target(target)), **knobs)


def build(func, target="llvm", **knobs):
    """Compile any Stage I function (``sparsetir.ir.SparseFunction``) for ``target``.

    ``knobs`` go to the schedule template of the target's device (see ``sparsetir.schedule``).
    The result is called with arrays by parameter name; it validates every input first.
    """
    target = normalize_target(target)
    return compile_module(scheduled_module(func, target, **knobs), target)


__all__ = ["build", "compile_module", "device_of", "normalize_target", "scheduled_module"]
