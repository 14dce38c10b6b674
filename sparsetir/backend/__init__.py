"""Backend: Stage I function -> lowered, scheduled, compiled and cached :class:`CompiledFunction`."""

from __future__ import annotations

from .compile import compile_module
from .target import device_of, normalize_target


def scheduled_module(func, target="llvm", *, specialize=None, **knobs):
    """Lower a Stage I function, bind ``specialize`` sizes to constants, and apply the target's
    schedule template; returns the IRModule."""
    from ..ir import SparseFunction
    from ..lower import lower
    from ..schedule import schedule
    from ..transform import specialize as bind_sizes

    if not isinstance(func, SparseFunction):
        raise TypeError(f"expected a sparsetir.ir.SparseFunction, got {type(func).__name__}")
    prim = lower(func)
    if specialize:
        prim = bind_sizes(prim, specialize)
    return schedule(prim, device_of(normalize_target(target)), **knobs)


def build(func, target="llvm", *, specialize=None, **knobs):
    """Compile any Stage I function (``sparsetir.ir.SparseFunction``) for ``target``.

    ``specialize``: ``{size name: value}`` to compile as constants. ``knobs`` go to the
    schedule template of the target's device (see ``sparsetir.schedule``). The result is
    called with arrays by parameter name; it validates every input first.
    """
    target = normalize_target(target)
    return compile_module(scheduled_module(func, target, specialize=specialize, **knobs), target)


__all__ = ["build", "compile_module", "device_of", "normalize_target", "scheduled_module"]
