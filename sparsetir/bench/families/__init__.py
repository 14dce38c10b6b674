"""The experiment families' declarations: one module per family, each registering one ``bench.family.Family``.

:func:`families` imports every module here; a new family is a new module.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..family import Family, registered

__all__ = ["families", "family"]


def families() -> dict[str, Family]:
    """Every registered family, by name (importing each module of this package)."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return registered()


def family(name: str) -> Family:
    """The registered family ``name``; ``ValueError`` naming the known ones."""
    known = families()
    if name not in known:
        raise ValueError(f"unknown experiment family {name!r}; known: {', '.join(known)}")
    return known[name]
