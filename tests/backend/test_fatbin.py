"""The fatbin parser finds containers by magic and lists their ELF/PTX entries, like cuobjdump."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from sparsetir.backend.cuda import find_nvcc, nvcc_available
from sparsetir.backend.fatbin import FATBIN_MAGIC, extract_fatbins, fatbin_containers, fatbin_entries

NVCC_OK, NVCC_REASON = nvcc_available()
needs_nvcc = pytest.mark.skipif(not NVCC_OK, reason=f"needs nvcc: {NVCC_REASON}")

KERNEL = 'extern "C" __global__ void add_one(float* a) { a[threadIdx.x] += 1.f; }\n'


def _entry(kind: int, arch: int, payload: bytes, compressed_size: int = 0) -> bytes:
    """An entry header laid out as documented in sparsetir/backend/fatbin.py, then its payload."""
    header = struct.pack(
        "<HHIQIIHHIIIQQQ", kind, 0x0101, 64, len(payload), compressed_size, 0, 0, 1, arch, 0, 0, 0x11, 0, 0
    )
    assert len(header) == 64
    return header + payload


def _container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def test_synthetic_container_inside_other_bytes_is_found():
    blob = _container(_entry(2, 90, b"\x7fELF" + bytes(60)), _entry(1, 90, b"x" * 24, compressed_size=20))
    data = os.urandom(123).replace(struct.pack("<I", FATBIN_MAGIC), b"....") + blob + b"tail"
    (container,) = fatbin_containers(data)
    assert container.offset == 123 and container.size == len(blob)
    assert [(e.kind, e.arch, e.size, e.compressed) for e in container.entries] == [
        ("ELF", "sm_90", 64, False),
        ("PTX", "sm_90", 20, True),
    ]
    assert extract_fatbins(data) == [blob]


def test_magic_without_a_consistent_container_is_ignored():
    good = _container(_entry(2, 80, bytes(8)))
    truncated = good[:-4]
    bad_size = struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, 10**9) + bytes(64)
    assert fatbin_entries(truncated) == []
    assert fatbin_entries(bad_size) == []
    assert [(e.kind, e.arch) for e in fatbin_entries(bad_size + good)] == [("ELF", "sm_80")]


@pytest.fixture(scope="module")
def nvcc_fatbin(tmp_path_factory) -> Path:
    if not NVCC_OK:
        pytest.skip(f"needs nvcc: {NVCC_REASON}")
    work = tmp_path_factory.mktemp("fatbin")
    (work / "k.cu").write_text(KERNEL)
    cmd = [
        find_nvcc(), "--fatbin", "-o", str(work / "k.fatbin"), str(work / "k.cu"),
        "-gencode", "arch=compute_90,code=[sm_90,compute_90]", "-gencode", "arch=compute_80,code=sm_80",
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    return work / "k.fatbin"


def test_nvcc_fatbin_lists_sass_for_each_arch_and_ptx(nvcc_fatbin):
    entries = fatbin_entries(nvcc_fatbin)
    assert [(e.kind, e.arch) for e in entries] == [("ELF", "sm_90"), ("PTX", "sm_90"), ("ELF", "sm_80")]
    (container,) = fatbin_containers(nvcc_fatbin)
    assert container.offset == 0 and container.size == nvcc_fatbin.stat().st_size
    data = nvcc_fatbin.read_bytes()
    for e in entries:
        if e.kind == "ELF":
            assert data[e.offset : e.offset + 4] == b"\x7fELF"


def _find_cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    nvcc = find_nvcc()
    if not found and nvcc:
        candidate = Path(os.path.realpath(nvcc)).parent / "cuobjdump"
        found = str(candidate) if candidate.is_file() else None
    if not found:  # the nvidia-cuda-cuobjdump wheel, if installed
        for base in sys.path:
            candidate = Path(base) / "nvidia" / "cu13" / "bin" / "cuobjdump"
            if candidate.is_file():
                return str(candidate)
    return found or os.environ.get("CUOBJDUMP")


def test_parser_agrees_with_cuobjdump(nvcc_fatbin, tmp_path):
    cuobjdump = _find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("needs cuobjdump (CUDA toolkit, or pip install nvidia-cuda-cuobjdump, or $CUOBJDUMP)")
    # also run it on a container cut out of a bigger file, as we do for exported .so files
    embedded = tmp_path / "cut.fatbin"
    embedded.write_bytes(extract_fatbins(b"\0" * 100 + nvcc_fatbin.read_bytes() + b"\0" * 7)[0])
    for path in (nvcc_fatbin, embedded):
        listing = ""
        for flag in ("--list-elf", "--list-ptx"):
            listing += subprocess.run([cuobjdump, flag, str(path)], capture_output=True, text=True, check=True).stdout
        theirs = sorted(re.findall(r"(ELF|PTX) file\s+\d+: \S*\.(sm_\d+)\.(?:cubin|ptx)", listing))
        ours = sorted((e.kind, e.arch) for e in fatbin_entries(path))
        assert ours == theirs
