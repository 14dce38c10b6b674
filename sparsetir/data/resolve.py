"""Find a registry file: the embedded ``data/`` folder, then the cache, the mirror, and a download.

The embedded folder comes first: it is part of the checkout, so a clone with no mirror and no
network still has the files that the default workflow needs, and reading them costs no look-up
elsewhere. The cache holds what earlier downloads fetched; the mirror (``$SPARSETIR_DATA_MIRROR``)
is a folder laid out like ``shared/data``; a download from the canonical URL lands in the cache.

Every route verifies the file. A recorded ``sha256`` is checked wherever the file is found;
a file without one (*unverified*) is checked against the digest pinned in the cache's
``pins.json``. Digests are pinned only on a download (the pin records the route and the URL),
never from a file that merely sits in a folder. A file that fails verification is reported and
the next route is tried, so a corrupt embedded or cached file falls back to a good copy further on.
The cache deletes only what lies inside it: a damaged file in the cache is deleted (it will be
fetched again), but one reached through the cache that really lives in the mirror or the
embedded folder (the cache pointed at the mirror, a symlink) is only refused.
When no route has the file, :class:`DatasetUnavailableError` says what each route answered;
when the only copies found were damaged, ``ValueError`` does. :func:`probe` asks the same
routes without downloading (the workflow's pre-flight table).
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from .cache import cache_dir, pin_sha256, pinned_sha256
from .checksum import file_sha256
from .download import DOWNLOAD_ENV, DownloadError, download, downloads_enabled
from .embedded import embedded_dir
from .mirror import MIRROR_ENV, mirror_dir

__all__ = ["DatasetUnavailableError", "Probe", "locate", "probe", "search_dirs"]


class DatasetUnavailableError(FileNotFoundError):
    """No route (embedded folder, cache, mirror, download) could provide a file."""


@dataclass(frozen=True)
class _Route:
    kind: str  # "embedded", "cache" or "mirror"
    directory: Path


#: The local routes, in the order they are tried (a download comes after them).
ROUTE_ORDER = ("embedded", "cache", "mirror")


def _routes() -> list[_Route]:
    folders = {"embedded": embedded_dir(), "cache": cache_dir(), "mirror": mirror_dir()}
    return [_Route(kind, folders[kind]) for kind in ROUTE_ORDER if folders[kind] is not None]


def search_dirs() -> list[Path]:
    """Folders searched for data files, in order: embedded ``data/``, cache, mirror."""
    return [route.directory for route in _routes()]


def _inside(path: Path, folder: Path | None) -> bool:
    if folder is None:
        return False
    folder = Path(os.path.realpath(folder))
    return path == folder or folder in path.parents


def _deletable(path: Path, route: _Route, routes: list[_Route]) -> bool:
    """Whether the cache may delete ``path``: a cache route's file that really lies inside the cache
    and in no other route's folder (the mirror and the embedded folder are never the cache's to delete)."""
    if route.kind != "cache":
        return False
    real = Path(os.path.realpath(path))
    return _inside(real, route.directory) and not any(
        _inside(real, other.directory) for other in routes if other.kind != "cache")


def _check(path: Path, file, *, deletable: bool, quiet: bool = False) -> Path:
    """Verify ``path`` against the recorded or pinned digest; ``ValueError`` saying why not.

    A file with neither a recorded nor a pinned digest is used unverified, with a note (unless
    ``quiet``): only a download pins a digest.
    """
    def refuse(message: str):
        if deletable:
            path.unlink(missing_ok=True)
            message += "; the cached file was deleted, run again to fetch it anew"
        else:
            message += " (left in place: not the cache's to delete)"
        raise ValueError(message)

    if file.size is not None and path.stat().st_size != file.size:
        refuse(
            f"{path} has {path.stat().st_size} bytes but {file.size} were expected "
            f"(sha256 {file.sha256}); the file is truncated or a different version"
        )
    expected = file.sha256 or pinned_sha256(file.relpath)
    if expected is None:
        if not quiet:
            print(f"note: {file.relpath} has no recorded or pinned sha256 (unverified); using {path} as it is "
                  "(a digest is pinned only when the file is downloaded)", file=sys.stderr)
        return path
    actual = file_sha256(path)
    if actual != expected.lower():
        what = "recorded" if file.sha256 else f"pinned (in {cache_dir() / 'pins.json'})"
        refuse(
            f"checksum mismatch for {path}: expected sha256 {expected.lower()} ({what}), got {actual}; "
            "the file is corrupt, truncated or a different version"
        )
    return path


@dataclass(frozen=True)
class Probe:
    """What the routes answer for one file, without downloading it (:func:`probe`).

    ``path`` and ``route`` name the verified local copy (``None``: none). ``tried`` says, per route
    in order, what it answered (``"embedded: not there"``, ``"mirror: none"``...); ``refused`` the
    copies that failed verification. ``download`` is the URL a download would fetch, ``None`` when
    no download is possible (then ``no_download`` says why).
    """

    relpath: str
    path: Path | None
    route: str | None
    tried: tuple[str, ...]
    refused: tuple[str, ...]
    download: str | None
    no_download: str | None


def _search(file, *, deletable: bool = True, quiet: bool = False):
    """The local routes for ``file``: (path or None, route kind or None, long "tried" lines, short ones, refused)."""
    tried, short, refused, seen = [], [], [], set()
    routes = _routes()
    for route in routes:
        path = route.directory / file.relpath
        if not path.is_file():
            tried.append(f"not in the {route.kind} folder {route.directory}")
            short.append(f"{route.kind}: not there")
            continue
        if os.path.realpath(path) in seen:  # the same file by another route (the cache pointed at the mirror)
            short.append(f"{route.kind}: the same file as above")
            continue
        seen.add(os.path.realpath(path))
        try:
            found = _check(path, file, deletable=deletable and _deletable(path, route, routes), quiet=quiet)
        except ValueError as error:
            refused.append(f"the {route.kind} copy was refused: {error}")
            short.append(f"{route.kind}: refused")
        else:
            short.append(f"{route.kind}: found")
            return found, route.kind, tried, short, refused
    if embedded_dir() is None:
        short.insert(0, "embedded: none")
    if mirror_dir() is None:
        tried.append(f"no mirror: {MIRROR_ENV} is unset or not a directory (e.g. ../shared/data)")
        short.append("mirror: none")
    return None, None, tried, short, refused


def _no_download(file, allow_download: bool | None) -> str | None:
    """Why ``file`` cannot be downloaded now, or ``None`` when a download may be tried."""
    if allow_download is None:
        allow_download = downloads_enabled()
    if not file.url:
        return "no download URL is recorded"
    if not allow_download:
        return f"downloads are disabled ({DOWNLOAD_ENV}=0)"
    if (cache_dir() / file.relpath).exists():  # a refused file the cache may not replace (it is the mirror's)
        return f"not downloaded: it would replace {cache_dir() / file.relpath}, which is not the cache's"
    return None


def probe(file, *, allow_download: bool | None = None) -> Probe:
    """Ask every local route for ``file`` (each copy verified, nothing deleted or downloaded).

    The answer says where the verified copy is, or what each route said and whether a download
    would be tried; :func:`locate` walks the same routes and then downloads.
    """
    path, route, _tried, short, refused = _search(file, deletable=False, quiet=True)
    blocked = None if path is not None else _no_download(file, allow_download)
    url = None if path is not None or blocked else file.url
    return Probe(file.relpath, path, route, tuple(short), tuple(refused), url, blocked)


def locate(file, *, allow_download: bool | None = None) -> Path:
    """The verified local path of registry file ``file`` (a ``DataFile``), fetching it if needed.

    A copy that fails verification is reported (one warning) and the next route is tried.
    """
    path, _route, tried, _short, refused = _search(file)
    if path is not None:
        return _checked_fallback(path, refused)
    blocked = _no_download(file, allow_download)
    if blocked:
        tried.append(blocked)
    else:
        target = cache_dir() / file.relpath
        pinned = pinned_sha256(file.relpath)
        try:
            digest = download(file.url, target, sha256=file.sha256 or pinned, size=file.size)
        except DownloadError as err:
            tried.append(f"download failed: {err}")
        except ValueError as error:
            refused.append(f"the download was refused: {error}")
        else:
            if file.sha256 is None and pinned is None:
                pins = pin_sha256(file.relpath, digest, file.url, route="download")
                print(f"note: {file.relpath} has no recorded sha256 (unverified); pinned {digest} in {pins}",
                      file=sys.stderr)
            return _checked_fallback(target, refused)
    if refused:
        raise ValueError("; ".join(refused + tried))
    raise DatasetUnavailableError(f"{file.relpath} is unavailable: " + "; ".join(tried))


def _checked_fallback(path: Path, refused: list[str]) -> Path:
    """``path``, with one warning when an earlier route's copy was refused on the way to it."""
    if refused:
        warnings.warn(f"{'; '.join(refused)}; using {path} instead", stacklevel=3)
    return path
