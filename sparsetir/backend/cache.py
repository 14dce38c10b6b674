"""Compiled-kernel cache: in memory per process, and on disk under ``$SPARSETIR_CACHE_DIR``.

Entries are keyed by a hash of the scheduled TensorIR, the target and the
versions, so a changed schedule or compiler never reuses a stale library. Each
entry is written to a temporary folder and renamed into place, so a killed
build never leaves a half-written entry behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

CACHE_ENV = "SPARSETIR_CACHE_DIR"


def cache_dir() -> Path:
    """``$SPARSETIR_CACHE_DIR``, else ``$XDG_CACHE_HOME/sparsetir``, else ``~/.cache/sparsetir``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "sparsetir"


def entry_key(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(part, sort_keys=True, default=str).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def entry_dir(key: str) -> Path:
    return cache_dir() / "kernels" / key


def publish(key: str, write) -> Path:
    """Run ``write(tmp_folder)`` and move the folder to the entry for ``key`` atomically."""
    final = entry_dir(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
    try:
        write(tmp)
        try:
            os.rename(tmp, final)
        except OSError:  # another process published it first
            if not final.exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
