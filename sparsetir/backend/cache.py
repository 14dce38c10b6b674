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


def source_digest() -> str:
    """A hash of the compiler's own sources (every ``sparsetir`` module), computed once per process.

    Part of every op-level index key, so an edited lowering or schedule never reuses an
    index entry that points at a kernel built by the old code.
    """
    global _SOURCE_DIGEST
    if _SOURCE_DIGEST is None:
        package = Path(__file__).resolve().parent.parent
        digest = hashlib.sha256()
        for path in sorted(package.rglob("*.py")):
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
        _SOURCE_DIGEST = digest.hexdigest()[:16]
    return _SOURCE_DIGEST


_SOURCE_DIGEST = None


def index_path(*parts) -> Path:
    """Where the op-level index entry for ``parts`` lives (it names a compiled kernel's folder)."""
    return cache_dir() / "index" / f"{entry_key(source_digest(), *parts)}.json"


def index_lookup(*parts) -> Path | None:
    """The kernel library an earlier process compiled for ``parts``, if it is still in the cache."""
    path = index_path(*parts)
    try:
        library = Path(json.loads(path.read_text())["library"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return library if library.exists() else None


def index_store(library: Path, *parts) -> None:
    """Remember that ``parts`` compiled to ``library`` (written atomically)."""
    path = index_path(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".index-", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump({"library": str(library), "key": [str(p) for p in parts]}, handle)
    os.replace(tmp, path)
