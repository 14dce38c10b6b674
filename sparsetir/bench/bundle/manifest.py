"""What the three halves of a GPU bundle share: the manifest's format, reading it, candidate names.

``build.py`` (compile host) writes a bundle, ``runner.py`` (GPU host, TVM runtime only) runs it,
``ingestion.py`` (compile host) reads the records it brought back; each imports this module only.
"""

from __future__ import annotations

import json
from pathlib import Path

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
