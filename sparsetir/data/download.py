"""Fetch a file over HTTP(S) into the cache: progress, resume, and a sha256 check.

The bytes go to ``<target>.part``. A later call resumes from the end of that file with an HTTP
``Range`` request (a server that ignores it sends the whole file, which restarts it). When the
file is complete its sha256 is checked; on a mismatch the file is deleted and ``ValueError``
is raised. Only a verified file is renamed to ``target`` (atomically), so ``target`` never
holds a partial or unverified download.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

__all__ = ["DOWNLOAD_ENV", "DownloadError", "download", "downloads_enabled", "unreachable"]

#: ``SPARSETIR_DATA_DOWNLOAD=0`` forbids downloads (the tests set it; the workflow has a key).
DOWNLOAD_ENV = "SPARSETIR_DATA_DOWNLOAD"
_CHUNK = 1 << 20
_PROGRESS_EVERY_S = 1.0


class DownloadError(OSError):
    """No bytes could be fetched from the URL (no network, HTTP error, refused)."""


def downloads_enabled() -> bool:
    """False when ``$SPARSETIR_DATA_DOWNLOAD`` is ``0``, ``false``, ``no`` or ``off``."""
    return os.environ.get(DOWNLOAD_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def unreachable(url: str, timeout: float = 2.0) -> str | None:
    """Why ``url``'s server cannot be reached now (no network, no name), or ``None`` when a TCP
    connection to it opens within ``timeout`` seconds. Nothing is requested or downloaded."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url} is not an http(s) URL"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return None
    except OSError as err:
        return f"{parts.hostname}:{port}: {getattr(err, 'strerror', None) or err or type(err).__name__}"


def _open(url: str, offset: int, timeout: float):
    request = urllib.request.Request(url, headers={"User-Agent": "sparsetir-data/1"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - registry URLs only
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # the partial file is already complete (or too long)
            return None
        raise DownloadError(f"GET {url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise DownloadError(f"GET {url}: {reason}") from None


def _human(nbytes: float) -> str:
    return f"{nbytes / 1e6:.1f} MB"


class _Progress:
    """Progress lines on ``stream``: at most one a second, and one at the end."""

    def __init__(self, url: str, stream: TextIO | None, start: int, total: int | None):
        self.url, self.stream, self.total = url, stream, total
        self.done, self.last = start, 0.0

    def advance(self, nbytes: int, *, final: bool = False) -> None:
        self.done += nbytes
        now = time.monotonic()
        if self.stream is None or (not final and now - self.last < _PROGRESS_EVERY_S):
            return
        self.last = now
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        total = f" / {_human(self.total)}" if self.total else ""
        print(f"downloading {self.url}: {_human(self.done)}{total}{share}", file=self.stream, flush=True)


def download(
    url: str,
    target: str | Path,
    *,
    sha256: str | None,
    size: int | None = None,
    timeout: float = 30.0,
    progress: TextIO | None | bool = True,
) -> str:
    """Download ``url`` to ``target`` (resuming ``target.part``); return the file's sha256.

    Progress lines go to ``progress`` (``True``: standard error, ``False``/``None``: nowhere).
    ``sha256=None`` accepts any content (the caller pins the returned digest). A size or
    digest mismatch deletes the partial file and raises ``ValueError``; a network failure
    keeps it for the next attempt and raises :class:`DownloadError`.
    """
    if progress is True:
        progress = sys.stderr
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    offset = part.stat().st_size if part.is_file() else 0
    if size is not None and offset > size:
        part.unlink()
        offset = 0
    response = _open(url, offset, timeout) if size is None or offset < size else None
    if response is not None:
        with response:
            resumed = offset and response.status == 206
            if offset and not resumed:
                offset = 0  # the server sent the whole file
            length = response.headers.get("Content-Length")
            total = offset + int(length) if length and length.isdigit() else size
            meter = _Progress(url, progress or None, offset, total)
            with part.open("ab" if resumed else "wb") as out:
                try:
                    while chunk := response.read(_CHUNK):
                        out.write(chunk)
                        meter.advance(len(chunk))
                except OSError as err:
                    raise DownloadError(f"GET {url}: interrupted after {meter.done} bytes ({err}); run again to resume") from None
                out.flush()
                os.fsync(out.fileno())
            meter.advance(0, final=True)
    actual_size = part.stat().st_size
    if size is not None and actual_size != size:
        part.unlink()
        raise ValueError(f"{url}: downloaded {actual_size} bytes but {size} were expected; the file was deleted")
    digest = hashlib.sha256()
    with part.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    actual = digest.hexdigest()
    if sha256 is not None and actual != sha256.lower():
        part.unlink()
        raise ValueError(
            f"checksum mismatch for {url}: expected sha256 {sha256.lower()}, got {actual}; the downloaded file "
            "was deleted (the server holds a different version, or the transfer was corrupted)"
        )
    os.replace(part, target)
    return actual
