"""Find CUDA fatbin containers in a file (an exported ``.so`` or a raw ``.fatbin``) and list their entries.

Layout (little-endian), as observed in nvcc 13 output and described in the reverse-engineered
notes of GrigoryEvko/nvopen-tools (``fatbin/FORMAT_SPECIFICATION.md``):

Container header, 16 bytes::

    u32 magic = 0xBA55ED50 | u16 version = 1 | u16 header size = 16 | u64 size of the entries that follow

Each entry is a header of ``header_size`` bytes (64, or more for newer targets) followed by its
payload; the next entry starts right after the payload::

    0x00 u16 kind (1 = PTX, 2 = ELF/cubin)   0x02 u16 (unknown)   0x04 u32 header size
    0x08 u64 payload size                     0x10 u32 compressed size (0 = stored plainly)
    0x18 u16 minor, u16 major version         0x1C u32 arch (90 = sm_90)
    0x28 u64 flags                            0x38 u64 uncompressed size (when compressed)

TVM's exported libraries embed the fatbin inside their own module blob, where ``cuobjdump`` does not
look; this scanner finds it by magic and keeps only containers whose entries tile it exactly.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
_CONTAINER_HEADER = struct.Struct("<IHHQ")
_ENTRY_MIN_HEADER = 64
_KIND_NAMES = {1: "PTX", 2: "ELF"}


@dataclass(frozen=True)
class FatbinEntry:
    """One payload of a fatbin: ``kind`` is 'ELF' (SASS cubin) or 'PTX'; ``arch`` like 'sm_90'.

    ``size`` is the number of payload bytes as stored; ``uncompressed_size`` equals it unless
    ``compressed``.  ``offset`` is where the payload starts in the scanned data.
    """

    kind: str
    arch: str
    size: int
    compressed: bool = False
    uncompressed_size: int = 0
    version: tuple[int, int] = (0, 0)
    offset: int = 0


@dataclass(frozen=True)
class FatbinContainer:
    """A fatbin container found at ``offset`` spanning ``size`` bytes (header included)."""

    offset: int
    size: int
    entries: list[FatbinEntry] = field(default_factory=list)


def _read(path_or_bytes: str | PathLike | bytes | bytearray | memoryview) -> bytes:
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes)
    return Path(path_or_bytes).read_bytes()


def _parse_entries(data: bytes, start: int, end: int) -> list[FatbinEntry] | None:
    """Entries of the container body ``data[start:end]``, or None when they do not tile it."""
    entries = []
    pos = start
    while pos < end:
        if pos + _ENTRY_MIN_HEADER > end:
            return None
        kind, _unknown, header_size, payload_size = struct.unpack_from("<HHIQ", data, pos)
        (compressed_size,) = struct.unpack_from("<I", data, pos + 0x10)
        minor, major, arch = struct.unpack_from("<HHI", data, pos + 0x18)
        (uncompressed,) = struct.unpack_from("<Q", data, pos + 0x38)
        if header_size < _ENTRY_MIN_HEADER or pos + header_size + payload_size > end:
            return None
        compressed = compressed_size != 0
        stored = compressed_size if compressed else payload_size
        entries.append(
            FatbinEntry(
                kind=_KIND_NAMES.get(kind, f"kind0x{kind:x}"),
                arch=f"sm_{arch}",
                size=stored,
                compressed=compressed,
                uncompressed_size=uncompressed if compressed and uncompressed else stored,
                version=(major, minor),
                offset=pos + header_size,
            )
        )
        pos += header_size + payload_size
    return entries if pos == end and entries else None


def fatbin_containers(path_or_bytes) -> list[FatbinContainer]:
    """Every well-formed fatbin container in a file or byte string, in file order."""
    data = _read(path_or_bytes)
    found: list[FatbinContainer] = []
    pos = data.find(_MAGIC_BYTES)
    while pos >= 0:
        next_search = pos + 4
        if pos + _CONTAINER_HEADER.size <= len(data):
            _magic, version, header_size, body_size = _CONTAINER_HEADER.unpack_from(data, pos)
            end = pos + header_size + body_size
            if version == 1 and header_size == _CONTAINER_HEADER.size and end <= len(data):
                entries = _parse_entries(data, pos + header_size, end)
                if entries is not None:
                    found.append(FatbinContainer(offset=pos, size=end - pos, entries=entries))
                    next_search = end
        pos = data.find(_MAGIC_BYTES, next_search)
    return found


def fatbin_entries(path_or_bytes) -> list[FatbinEntry]:
    """All entries of all fatbin containers in an exported library or a raw ``.fatbin``."""
    return [entry for container in fatbin_containers(path_or_bytes) for entry in container.entries]


def extract_fatbins(path_or_bytes) -> list[bytes]:
    """The raw bytes of each container (write one to ``x.fatbin`` to inspect it with cuobjdump)."""
    data = _read(path_or_bytes)
    return [data[c.offset : c.offset + c.size] for c in fatbin_containers(data)]


def describe(entries: list[FatbinEntry]) -> str:
    """Short human-readable list, e.g. ``ELF sm_90 5.5 KB, PTX sm_90 1.0 KB``."""
    return ", ".join(f"{e.kind} {e.arch} {e.size / 1024:.1f} KB" for e in entries)
