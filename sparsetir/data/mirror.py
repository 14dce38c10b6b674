"""The offline data mirror: a directory laid out like ``shared/data`` (one folder per source)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MIRROR_ENV", "mirror_dir"]

#: Environment variable naming the mirror directory (the Makefile sets it to ``../shared/data``).
MIRROR_ENV = "SPARSETIR_DATA_MIRROR"


def mirror_dir() -> Path | None:
    """The mirror directory from ``$SPARSETIR_DATA_MIRROR``; ``None`` when unset or not a directory."""
    value = os.environ.get(MIRROR_ENV, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    return path.resolve() if path.is_dir() else None
