"""Size guards for the parsers: refuse an oversized input before allocating for it.

Every parser takes ``max_nnz`` (stored entries, and also rows or columns, of the matrix it
would build) and ``max_bytes`` (bytes read or decompressed into memory at once). ``None``
means ``$SPARSETIR_DATA_MAX_NNZ`` / ``$SPARSETIR_DATA_MAX_BYTES``, else the defaults below,
sized for a 24 GB machine: building a canonical CSR of ``n`` entries peaks at about 40 bytes
per entry (coordinates, then the sorted copy), so 2.5e8 entries stay under 10 GB; every graph
in the registry (reddit, the largest, has 1.15e8) fits. Checks use declared sizes (headers,
archive member sizes, npy headers, counts) before the data is read, so a 7 KB zip that expands
to gigabytes, a pickle that repeats one long list, or a header declaring 3e9 rows is refused
with :class:`DataTooLargeError` (a ``ValueError``) naming the limit and how to raise it.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_NNZ", "MAX_BYTES_ENV", "MAX_NNZ_ENV", "DataTooLargeError", "SizeLimits",
           "size_limits"]

MAX_NNZ_ENV = "SPARSETIR_DATA_MAX_NNZ"
MAX_BYTES_ENV = "SPARSETIR_DATA_MAX_BYTES"
#: Stored entries (and rows, and columns) of one parsed matrix.
DEFAULT_MAX_NNZ = 250_000_000
#: Bytes of one file, archive member or decompressed stream held in memory.
DEFAULT_MAX_BYTES = 2 << 30


class DataTooLargeError(ValueError):
    """An input declares (or expands to) more than the parser's ``max_nnz`` / ``max_bytes``."""


def _from_env(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        limit = int(float(value))
    except ValueError:
        raise ValueError(f"${name} must be a positive number, got {value!r}") from None
    if limit <= 0:
        raise ValueError(f"${name} must be a positive number, got {value!r}")
    return limit


@dataclass(frozen=True)
class SizeLimits:
    """The guard of one parse: ``max_nnz`` entries and ``max_bytes`` bytes."""

    max_nnz: int
    max_bytes: int

    def _refuse(self, where: str, what: str, count: int, limit: int, knob: str, env: str) -> None:
        raise DataTooLargeError(f"{where}: {what} {count:,} exceeds {knob}={limit:,}; refused before building the "
                                f"matrix (pass a larger {knob} to the parser, or set ${env})")

    def entries(self, count: int, where: str, what: str = "stored entries") -> None:
        """Refuse ``count`` entries (edges, non-zeros, points) above ``max_nnz``."""
        if count > self.max_nnz:
            self._refuse(where, what, int(count), self.max_nnz, "max_nnz", MAX_NNZ_ENV)

    def shape(self, shape, where: str) -> None:
        """Refuse a matrix whose rows or columns exceed ``max_nnz`` (its index arrays would)."""
        for extent, what in zip(shape, ("rows", "columns")):
            self.entries(int(extent), where, what)

    def nbytes(self, count: int, where: str, what: str = "bytes") -> None:
        """Refuse ``count`` bytes above ``max_bytes``."""
        if count > self.max_bytes:
            self._refuse(where, what, int(count), self.max_bytes, "max_bytes", MAX_BYTES_ENV)

    def file(self, path, where: str | None = None) -> None:
        """Refuse a file larger than ``max_bytes``."""
        self.nbytes(os.stat(path).st_size, where or str(path), "file size (bytes)")

    def archive(self, archive: zipfile.ZipFile, where: str) -> None:
        """Refuse a zip (or ``.npz``) whose members declare more than ``max_bytes`` uncompressed in all."""
        self.nbytes(sum(info.file_size for info in archive.infolist()), where, "uncompressed bytes")

    def read(self, stream: BinaryIO, where: str) -> bytes:
        """Read ``stream`` to its end, refusing it once it passes ``max_bytes``."""
        data = stream.read(self.max_bytes + 1)
        self.nbytes(len(data), where, "bytes (at least)")
        return data

    def gunzip(self, data: bytes, where: str) -> bytes:
        """Decompress gzip ``data``, refusing it once the output passes ``max_bytes`` (a zip bomb)."""
        out, rest = bytearray(), data
        while rest.strip(b"\0"):  # one gzip member after another; trailing zero padding is ignored
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            try:
                out += inflater.decompress(rest, self.max_bytes + 1 - len(out))
            except zlib.error as err:
                raise ValueError(f"{where}: truncated or corrupt gzip data: {err}") from None
            self.nbytes(len(out), where, "decompressed bytes (at least)")
            if not inflater.eof:
                if inflater.unconsumed_tail:  # stopped at max_bytes + 1 with input left
                    self.nbytes(self.max_bytes + 1, where, "decompressed bytes (at least)")
                raise ValueError(f"{where}: truncated gzip data (the stream ends early)")
            rest = inflater.unused_data
        return bytes(out)


def size_limits(max_nnz: int | None = None, max_bytes: int | None = None) -> SizeLimits:
    """The guard for one parse: the given limits, else the environment's, else the defaults."""
    nnz = _from_env(MAX_NNZ_ENV, DEFAULT_MAX_NNZ) if max_nnz is None else int(max_nnz)
    nbytes = _from_env(MAX_BYTES_ENV, DEFAULT_MAX_BYTES) if max_bytes is None else int(max_bytes)
    if nnz <= 0 or nbytes <= 0:
        raise ValueError(f"max_nnz and max_bytes must be positive, got {nnz} and {nbytes}")
    return SizeLimits(nnz, nbytes)
