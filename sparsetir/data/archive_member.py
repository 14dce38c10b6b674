"""Read one member of a downloaded ``.zip`` or ``.tar[.gz]`` archive without extracting it.

Nothing is written to disk, so member names (which could hold ``..`` or absolute paths) never
become file paths.
"""

from __future__ import annotations

import contextlib
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["archive_members", "open_member"]


def archive_members(archive: str | Path) -> list[str]:
    """The regular-file member names of ``archive``."""
    archive = Path(archive)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as handle:
            return [info.filename for info in handle.infolist() if not info.is_dir()]
    try:
        with tarfile.open(archive) as handle:
            return [info.name for info in handle.getmembers() if info.isfile()]
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ValueError(f"{archive}: neither a zip nor a tar archive, it may be truncated or corrupt: {err}") from None


def _match(names: list[str], member: str, archive: Path) -> str:
    hits = [name for name in names if name == member or name.endswith("/" + member)]
    if len(hits) != 1:
        found = "no member" if not hits else f"{len(hits)} members ({', '.join(hits[:4])})"
        raise ValueError(f"{archive}: expected one member named {member!r} (or ending in /{member}), found {found}")
    return hits[0]


@contextlib.contextmanager
def open_member(archive: str | Path, member: str) -> Iterator[BinaryIO]:
    """Open the member of ``archive`` named ``member`` (or ending in ``/member``) for reading."""
    archive = Path(archive)
    name = _match(archive_members(archive), member, archive)
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as handle, handle.open(name) as stream:
                yield stream
        else:
            with tarfile.open(archive) as handle:
                stream = handle.extractfile(name)
                with stream:
                    yield stream
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as err:
        raise ValueError(f"{archive}[{name}]: damaged archive member: {err}") from None
