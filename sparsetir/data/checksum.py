"""SHA-256 of data files, hashed once per process per (file, modification time, size)."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

__all__ = ["file_sha256", "verify_sha256"]

_CHUNK = 1 << 20
_digests: dict[tuple[str, int, int, int], str] = {}
_lock = threading.Lock()


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of the file at ``path``; cached until the file's mtime or size changes."""
    path = Path(path)
    stat = path.stat()
    key = (os.path.realpath(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    with _lock:
        cached = _digests.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    hexdigest = digest.hexdigest()
    with _lock:
        _digests[key] = hexdigest
    return hexdigest


def verify_sha256(path: str | Path, expected: str) -> None:
    """Raise ``ValueError`` naming the file and both digests unless ``path`` hashes to ``expected``."""
    actual = file_sha256(path)
    if actual != expected.lower():
        raise ValueError(
            f"checksum mismatch for {path}: expected sha256 {expected.lower()}, got {actual}; "
            "the file is corrupt, truncated or a different version"
        )
