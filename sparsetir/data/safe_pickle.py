"""Unpickling restricted to an explicit allow-list of globals.

A pickle can name any importable callable (``os.system``, ``builtins.eval``) and call it while
loading. :class:`RestrictedUnpickler` refuses every global that the caller did not list, *before*
anything is called, so a hostile file fails with :class:`RefusedGlobalError` instead of running.

The allow-list maps each ``(module, name)`` pair, exactly as the pickle spells it, to the object it
should resolve to. Nothing is imported by name: old spellings (``__builtin__.list`` from Python 2,
``numpy.core.multiarray`` from numpy 1) simply map to today's objects.
"""

from __future__ import annotations

import builtins
import io
import pickle
from collections.abc import Iterable, Mapping
from typing import Any, BinaryIO

__all__ = ["RefusedGlobalError", "RestrictedUnpickler", "restricted_load", "restricted_loads"]

GlobalName = tuple[str, str]


class RefusedGlobalError(pickle.UnpicklingError):
    """A pickle referenced a global that is not on the allow-list."""


def _allow_map(allowed: Mapping[GlobalName, Any] | Iterable[GlobalName]) -> dict[GlobalName, Any]:
    """Normalise the allow-list; bare pairs resolve to the builtin of that name."""
    if isinstance(allowed, Mapping):
        table = dict(allowed)
    else:
        table = {}
        for pair in allowed:
            module, name = pair
            if module not in ("builtins", "__builtin__"):
                raise TypeError(
                    f"allow-list entry {module}.{name} needs the object it resolves to: "
                    "pass a mapping {(module, name): object}"
                )
            table[(module, name)] = getattr(builtins, name)
    for key in table:
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            raise TypeError(f"allow-list keys must be (module, name) string pairs, got {key!r}")
    return table


class RestrictedUnpickler(pickle.Unpickler):
    """A :class:`pickle.Unpickler` that resolves only allow-listed globals.

    ``allowed`` is either a mapping ``{(module, name): object}`` or, for builtins only, an
    iterable of ``(module, name)`` pairs. Persistent ids and out-of-band buffers stay disabled
    (the base class refuses them).
    """

    def __init__(
        self,
        file: BinaryIO,
        allowed: Mapping[GlobalName, Any] | Iterable[GlobalName],
        *,
        encoding: str = "ASCII",
        errors: str = "strict",
    ) -> None:
        # fix_imports=False: the allow-list decides what old module names mean.
        super().__init__(file, fix_imports=False, encoding=encoding, errors=errors)
        self._allowed = _allow_map(allowed)

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            allowed = ", ".join(sorted(f"{m}.{n}" for m, n in self._allowed)) or "nothing"
            raise RefusedGlobalError(
                f"refused to unpickle global {module}.{name}: it is not on the allow-list ({allowed})"
            ) from None


def restricted_load(
    file: BinaryIO,
    allowed: Mapping[GlobalName, Any] | Iterable[GlobalName],
    *,
    encoding: str = "ASCII",
) -> Any:
    """Unpickle one object from ``file``, resolving only allow-listed globals."""
    return RestrictedUnpickler(file, allowed, encoding=encoding).load()


def restricted_loads(
    data: bytes,
    allowed: Mapping[GlobalName, Any] | Iterable[GlobalName],
    *,
    encoding: str = "ASCII",
) -> Any:
    """Unpickle one object from ``data``, resolving only allow-listed globals."""
    return restricted_load(io.BytesIO(data), allowed, encoding=encoding)
