"""The small graphs embedded in the repository's ``data/`` folder (laid out like the mirror).

They let the default workflow run on the paper's small graphs with no mirror and no network.
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
