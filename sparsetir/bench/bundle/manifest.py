"""What the three halves of a GPU bundle share: the manifest's format, reading it, candidate names.

``build.py`` (compile host) writes a bundle, ``runner.py`` (GPU host, TVM runtime only) runs it,
``ingestion.py`` (compile host) reads the records it brought back; each imports this module only.
"""

from __future__ import annotations

import json
from pathlib import Path

import baselines

BUNDLE_FORMAT = "sparsetir-bundle/1"
CANDIDATE_PREFIX = "sparsetir"


def read_manifest(bundle) -> dict:
    """A bundle's manifest, checked to be one."""
    path = Path(bundle) / "manifest.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is {bundle} a bundle (python -m sparsetir.bench.bundle build)?")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != BUNDLE_FORMAT:
        raise ValueError(f"{path} is not a {BUNDLE_FORMAT} manifest (format {manifest.get('format')!r})")
    return manifest


def contender_name(candidate: dict) -> str:
    """``sparsetir[<candidate id>]``."""
    return f"{CANDIDATE_PREFIX}[{candidate['id']}]"


def is_candidate_name(contender: str) -> bool:
    return contender.startswith(CANDIDATE_PREFIX + "[")


def bundle_baselines(key: str, names, device: str, *, same_result: bool = False) -> list[str]:
    """The declared baselines of op or family ``key`` a bundle for ``device`` carries: ``names`` (variant or
    library names, ``ValueError`` for any other; one that cannot run there gets a row saying why), by default
    the ones listed for ``device`` that run by default. ``same_result``: only variants that compute the op's
    result (its library references), as the runner's check refuses any other."""
    chosen = baselines.variants(key, names if names is not None else baselines.default_names(key, device))
    other = [name for name, entry in chosen.items() if same_result and not entry.variant.library_reference]
    if other:
        raise ValueError(f"unknown {key} bundle baseline(s) {other}: they compute something else than the op (the "
                         "runner's check would refuse them)")
    return list(chosen)
