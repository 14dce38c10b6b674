"""Backend: Stage I function -> lowered, scheduled, compiled and cached :class:`CompiledFunction`."""

from __future__ import annotations

from .compile import compile_module
from .target import device_of, normalize_target


def build(func, target="llvm", **knobs):
    """Compile any Stage I function (``sparsetir.ir.SparseFunction``) for ``target``.

    ``knobs`` go to the schedule template of the target's device (see ``sparsetir.schedule``).
    The result is called with arrays by parameter name; it validates every input first.
    """
    from ..ir import SparseFunction
    from ..lower import lower
    from ..schedule import schedule

    if not isinstance(func, SparseFunction):
        raise TypeError(f"build takes a sparsetir.ir.SparseFunction, got {type(func).__name__}")
    target = normalize_target(target)
    scheduled = schedule(lower(func), device_of(target), **knobs)
    return compile_module(scheduled.mod, target)


__all__ = ["build", "compile_module", "device_of", "normalize_target"]
