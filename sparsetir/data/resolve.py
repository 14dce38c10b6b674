"""Find a registry file: the cache, then the embedded and mirror folders, then a download.

Every route verifies the file. A recorded ``sha256`` is checked wherever the file is found;
a file without one (*unverified*) is checked against the digest pinned in the cache on its
first download, and pinned now if it has none. A damaged file in the cache is deleted (it will
be fetched again); a damaged file in a read-only folder (mirror, embedded) is only refused.
When no route has the file, :class:`DatasetUnavailableError` says what each route answered.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from .cache import cache_dir, pin_sha256, pinned_sha256
from .checksum import file_sha256
from .download import DOWNLOAD_ENV, DownloadError, download, downloads_enabled
from .embedded import embedded_dir
from .mirror import MIRROR_ENV, mirror_dir

__all__ = ["DatasetUnavailableError", "locate", "search_dirs"]


class DatasetUnavailableError(FileNotFoundError):
    """No route (cache, embedded folder, mirror, download) could provide a file."""


@dataclass(frozen=True)
class _Route:
    kind: str  # "cache", "embedded" or "mirror"
    directory: Path


def _routes() -> list[_Route]:
    routes = [_Route("cache", cache_dir())]
    for kind, directory in (("embedded", embedded_dir()), ("mirror", mirror_dir())):
        if directory is not None:
            routes.append(_Route(kind, directory))
    return routes


def search_dirs() -> list[Path]:
    """Folders searched for data files, in order: cache, embedded ``data/``, mirror."""
    return [route.directory for route in _routes()]


def _check(path: Path, file, *, deletable: bool) -> Path:
    """Verify ``path`` against the recorded or pinned digest (pin it when there is none)."""
    def refuse(message: str):
        if deletable:
            path.unlink(missing_ok=True)
            message += "; the cached file was deleted, run again to fetch it anew"
        raise ValueError(message)

    if file.size is not None and path.stat().st_size != file.size:
        refuse(
            f"{path} has {path.stat().st_size} bytes but {file.size} were expected "
            f"(sha256 {file.sha256}); the file is truncated or a different version"
        )
    expected = file.sha256 or pinned_sha256(file.relpath)
    actual = file_sha256(path)
    if expected is None:
        pins = pin_sha256(file.relpath, actual, file.url)
        print(f"note: {file.relpath} has no recorded sha256 (unverified); pinned {actual} in {pins}", file=sys.stderr)
    elif actual != expected.lower():
        what = "recorded" if file.sha256 else f"pinned (in {cache_dir() / 'pins.json'})"
        refuse(
            f"checksum mismatch for {path}: expected sha256 {expected.lower()} ({what}), got {actual}; "
            "the file is corrupt, truncated or a different version"
        )
    return path


def locate(file, *, allow_download: bool | None = None) -> Path:
    """The verified local path of registry file ``file`` (a ``DataFile``), fetching it if needed."""
    tried = []
    for route in _routes():
        path = route.directory / file.relpath
        if path.is_file():
            return _check(path, file, deletable=route.kind == "cache")
        tried.append(f"not in the {route.kind} folder {route.directory}")
    if mirror_dir() is None:
        tried.append(f"no mirror: {MIRROR_ENV} is unset or not a directory (e.g. ../shared/data)")
    if allow_download is None:
        allow_download = downloads_enabled()
    if not file.url:
        tried.append("no download URL is recorded")
    elif not allow_download:
        tried.append(f"downloads are disabled ({DOWNLOAD_ENV}=0)")
    else:
        target = cache_dir() / file.relpath
        try:
            digest = download(file.url, target, sha256=file.sha256 or pinned_sha256(file.relpath), size=file.size)
        except DownloadError as err:
            tried.append(f"download failed: {err}")
        else:
            if file.sha256 is None and pinned_sha256(file.relpath) is None:
                pins = pin_sha256(file.relpath, digest, file.url)
                print(f"note: {file.relpath} has no recorded sha256 (unverified); pinned {digest} in {pins}",
                      file=sys.stderr)
            return target
    raise DatasetUnavailableError(f"{file.relpath} is unavailable: " + "; ".join(tried))
