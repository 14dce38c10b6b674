"""Extension points a lower layer reads and a higher layer fills, so imports stay downward.

``format="auto"`` is asked of the ops (``sparsetir.ops``), but answered by the tuner
(``sparsetir.tune``), which sits above them. The ops read the resolver from here; the tuner
registers it when it is imported, and the package facade (``sparsetir/__init__.py``) registers
a stand-in that imports the tuner on first use, so ``import sparsetir`` stays light (the
runtime must load without the compiler).

A resolver is called as ``resolver(op, A, feat, *, target, dtype) -> config`` and returns a
configuration dict ``{"format": ..., **knobs}`` that the op's compile function accepts.
"""

from __future__ import annotations

from collections.abc import Callable

FormatResolver = Callable[..., dict]
_format_resolver: FormatResolver | None = None


def register_format_resolver(resolver: FormatResolver | None) -> FormatResolver | None:
    """Make ``resolver`` the answer to ``format="auto"`` (None unregisters); returns the previous one."""
    global _format_resolver
    if resolver is not None and not callable(resolver):
        raise TypeError(f"a format resolver must be callable, got {type(resolver).__name__}")
    previous, _format_resolver = _format_resolver, resolver
    return previous


def format_resolver() -> FormatResolver:
    """The registered resolver; a ``RuntimeError`` saying what to import when there is none."""
    if _format_resolver is None:
        raise RuntimeError("format='auto' needs the tuner, and none is registered: import sparsetir.tune "
                           "(which registers it), or pass an explicit format such as 'csr'")
    return _format_resolver
