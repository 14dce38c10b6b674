"""Read single arrays out of an ``.npz`` archive without trusting embedded pickles.

Plain arrays load through ``numpy.lib.format.read_array(allow_pickle=False)``. An object array
(which numpy stores as a pickle after the ``.npy`` header) is unpickled only through
:class:`~sparsetir.data.safe_pickle.RestrictedUnpickler`, with the caller's allow-list.
"""

from __future__ import annotations

import io
import pickle
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npy_format

from .safe_pickle import GlobalName, RefusedGlobalError, RestrictedUnpickler
from .size_limits import size_limits

__all__ = ["NPZ_READ_ERRORS", "npz_members", "read_npz_member"]

#: What reading an ``.npz`` archive or one of its members raises when the file is truncated, corrupt
#: or not an archive (numpy and zipfile raise these rather than ValueError). Every npz reader turns
#: them into a ValueError naming the file.
NPZ_READ_ERRORS: tuple[type[BaseException], ...] = (OSError, zipfile.BadZipFile, zlib.error, EOFError)


def _open_archive(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as err:
        raise ValueError(f"{path}: not a valid .npz (zip) archive, it may be truncated or corrupt: {err}") from None


def npz_members(path: str | Path) -> list[str]:
    """Names of the arrays in an ``.npz`` archive (without the ``.npy`` suffix)."""
    path = Path(path)
    with _open_archive(path) as archive:
        return [name[: -len(".npy")] for name in archive.namelist() if name.endswith(".npy")]


def _read_header(stream: io.BytesIO, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = npy_format.read_magic(stream)
        if version == (1, 0):
            return npy_format.read_array_header_1_0(stream)
        if version == (2, 0):
            return npy_format.read_array_header_2_0(stream)
    except ValueError as err:
        raise ValueError(f"{where}: bad .npy header: {err}") from None
    raise ValueError(f"{where}: unsupported .npy format version {version[0]}.{version[1]}")


def read_npz_member(
    path: str | Path,
    member: str,
    allowed_globals: Mapping[GlobalName, Any] | Iterable[GlobalName] = (),
    *,
    max_bytes: int | None = None,
) -> np.ndarray:
    """Return array ``member`` of the archive at ``path``.

    A member that declares more than ``max_bytes`` uncompressed is refused before it is read
    (:mod:`sparsetir.data.size_limits`).

    Object arrays are unpickled with only ``allowed_globals`` resolvable; a pickle naming any
    other global raises :class:`~sparsetir.data.safe_pickle.RefusedGlobalError` before anything
    runs. A missing member, a damaged archive or a truncated payload raises ``ValueError``.
    """
    path = Path(path)
    entry = member if member.endswith(".npy") else member + ".npy"
    where = f"{path}[{entry}]"
    with _open_archive(path) as archive:
        if entry not in archive.namelist():
            known = ", ".join(n[:-4] for n in archive.namelist() if n.endswith(".npy"))
            raise ValueError(f"{path}: no array named {member!r} (it holds: {known})")
        size_limits(max_bytes=max_bytes).nbytes(archive.getinfo(entry).file_size, where, "uncompressed bytes")
        try:
            payload = archive.read(entry)
        except NPZ_READ_ERRORS as err:
            raise ValueError(f"{where}: damaged archive member: {err}") from None
    stream = io.BytesIO(payload)
    shape, _fortran_order, dtype = _read_header(stream, where)
    if not dtype.hasobject:
        stream.seek(0)
        try:
            return npy_format.read_array(stream, allow_pickle=False)
        except ValueError as err:
            raise ValueError(f"{where}: truncated or corrupt array data: {err}") from None
    try:
        array = RestrictedUnpickler(stream, allowed_globals, encoding="latin1").load()
    except RefusedGlobalError as err:
        raise RefusedGlobalError(f"{where}: {err}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as err:
        raise ValueError(f"{where}: truncated or corrupt pickled array: {err}") from None
    if not isinstance(array, np.ndarray) or array.shape != tuple(shape):
        raise TypeError(
            f"{where}: the pickle should hold an object array of shape {tuple(shape)}, "
            f"got {type(array).__name__}{getattr(array, 'shape', '')}"
        )
    return array
