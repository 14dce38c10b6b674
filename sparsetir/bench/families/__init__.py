"""The experiment families' declarations: one module per family, each registering one ``bench.family.Family``.

:func:`families` imports every module here; a new family is a new module.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..family import Family, registered

__all__ = ["families", "family", "family_names", "trainers"]


def family_names() -> tuple[str, ...]:
    """The families' names without importing their modules: a module here registers the family of its name
    (:func:`families` checks it), so planning a workflow needs no compiler or torch."""
    return tuple(sorted(module.name for module in pkgutil.iter_modules(__path__) if not module.name.startswith("_")))


def families() -> dict[str, Family]:
    """Every registered family, by name (importing each module of this package)."""
    for name in family_names():
        importlib.import_module(f"{__name__}.{name}")
        if name not in registered():
            raise ValueError(f"{__name__}.{name} registers no family named {name!r}")
    return registered()


def family(name: str) -> Family:
    """The registered family ``name``; ``ValueError`` naming the known ones."""
    known = families()
    if name not in known:
        raise ValueError(f"unknown experiment family {name!r}; known: {', '.join(known)}")
    return known[name]


def trainers() -> dict:
    """Every training experiment the families declare (``Family.trainer``, ``Family.trainings``), by name."""
    found = {}
    for declared in families().values():
        for trainer in ([declared.trainer] if declared.trainer is not None else []) + [*declared.trainings.values()]:
            found[trainer.name] = trainer
    return found
