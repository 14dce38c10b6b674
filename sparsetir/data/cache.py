"""The download cache: where fetched files live, and the sha256 pins of unverified files.

A registry file whose digest cannot be known in advance (``sha256=None``: the large graphs
need a network to hash) is *pinned* on its first download: its digest, the URL and the route
(``download``) are written to ``pins.json`` in the cache, and every later use is verified
against that pin.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "pinned_sha256", "pin_sha256", "pins_path"]

#: Environment variable naming the cache directory (default ``~/.cache/sparsetir/data``).
CACHE_ENV = "SPARSETIR_DATA_CACHE"


def cache_dir() -> Path:
    """The cache directory from ``$SPARSETIR_DATA_CACHE``, else ``~/.cache/sparsetir/data``."""
    value = os.environ.get(CACHE_ENV, "").strip()
    if value:
        return Path(value).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "sparsetir" / "data"


def pins_path() -> Path:
    """The JSON file mapping a cached file's relative path to its pinned sha256."""
    return cache_dir() / "pins.json"


def _read_pins() -> dict:
    path = pins_path()
    if not path.is_file():
        return {}
    try:
        pins = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: unreadable sha256 pins ({err}); delete it to re-pin on the next download") from None
    if not isinstance(pins, dict):
        raise ValueError(f"{path}: sha256 pins must be a JSON object")
    return pins


def pinned_sha256(relpath: str) -> str | None:
    """The digest pinned for ``relpath`` on its first download, or ``None``."""
    pin = _read_pins().get(relpath)
    return pin.get("sha256") if isinstance(pin, dict) else None


def pin_sha256(relpath: str, sha256: str, url: str | None, *, route: str = "download") -> Path:
    """Record ``sha256`` as the digest of ``relpath``, with the route it came by (atomically); returns the pins file.

    Only a download pins (:func:`sparsetir.data.resolve.locate`): a file found in a folder is
    never trusted enough to become the reference for later uses.
    """
    pins = _read_pins()
    pins[relpath] = {"sha256": sha256, "url": url, "route": route,
                     "pinned": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path = pins_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".pins-", suffix=".tmp", delete=False) as out:
        json.dump(pins, out, indent=1, sort_keys=True)
        out.flush()
        os.fsync(out.fileno())
    os.replace(out.name, path)
    return path
