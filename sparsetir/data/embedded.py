"""The real data embedded in the repository's ``data/`` folder (laid out like the mirror).

It lets the default workflow time every family with no mirror and no network (``data/EMBEDDED.md``
lists the files and why each is there); it is the first route searched, and its files are
verified against their recorded sha256 like every other route's.
``$SPARSETIR_DATA_EMBEDDED`` overrides the folder; an empty value or ``none`` disables it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["EMBEDDED_ENV", "embedded_dir"]

EMBEDDED_ENV = "SPARSETIR_DATA_EMBEDDED"
#: The file that marks a folder as the embedded data folder (it lists what is there and why).
EMBEDDED_MARKER = "EMBEDDED.md"
_REPO_DATA = Path(__file__).resolve().parents[2] / "data"


def embedded_dir() -> Path | None:
    """The embedded data folder, or ``None`` when disabled or absent (e.g. an installed wheel)."""
    value = os.environ.get(EMBEDDED_ENV)
    if value is not None:
        value = value.strip()
        if not value or value.lower() == "none":
            return None
        path = Path(value).expanduser()
        return path.resolve() if path.is_dir() else None
    return _REPO_DATA if (_REPO_DATA / EMBEDDED_MARKER).is_file() else None
