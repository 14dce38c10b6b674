"""A family's part of a GPU bundle, declared once: what ``build`` compiles into the bundle for it and how the
runner checks and times it on the GPU host.

A module of this package named after a family of the registry (``sparsetir.bench.families``) declares
``PART = BundlePart(...)``; :func:`bundle_parts` finds them, so ``build.py`` and ``runner.py`` loop over
the parts instead of naming families: the manifest's section, ``build_bundle``'s keyword and the config's
``bundle.<name>`` key are the part's ``name``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..families import family_names

__all__ = ["BundlePart", "bundle_parts"]


@dataclass(frozen=True)
class BundlePart:
    """One family's part of a bundle.

    ``build(staging, settings, *, target, seed, scratch, store_library, store_candidate_files, say)``
    compiles the candidates of ``settings`` (the ``bundle.<name>`` config section) into the staged
    bundle and returns the manifest's section ``name``; ``run(bundle, manifest, out, scratch, assemble, *,
    bandwidth, timing, where, deadline_s, say)`` checks and times them on the GPU host and returns the
    record files it wrote. ``what``: the candidates' name in messages ("the R-GCN candidates");
    ``order``: parts build and run in this order (after the op's cases); ``dataset_key``: the key of a
    section's cases that the runner's ``--dataset`` selects on (None: it does not); ``add_arguments`` /
    ``from_arguments``: the part's options of ``python -m sparsetir.bench.bundle build`` and the settings
    they give (None: the part was not asked for)."""

    name: str
    what: str
    build: Callable[..., dict]
    run: Callable[..., list[str]]
    order: int = 0
    dataset_key: str | None = None
    add_arguments: Callable | None = None
    from_arguments: Callable | None = None


def bundle_parts() -> dict[str, BundlePart]:
    """Every family's bundle part, by name, in build and run order (importing the modules that declare one)."""
    modules = {module.name for module in pkgutil.iter_modules([str(Path(__file__).parent)])}
    parts = []
    for name in family_names():
        if name not in modules:
            continue
        part = getattr(importlib.import_module(f"{__package__}.{name}"), "PART", None)
        if part is None:
            continue
        if not isinstance(part, BundlePart) or part.name != name:
            raise ValueError(f"{__package__}.{name}.PART must be a BundlePart named {name!r}")
        parts.append(part)
    return {part.name: part for part in sorted(parts, key=lambda part: (part.order, part.name))}
