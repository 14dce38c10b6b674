"""A damaged kernel cache is rebuilt with one warning, never a crash; an unusable one is replaced.

Issue 13, item 2. A truncated ``kernel.so`` used to kill every later process with SIGBUS inside
the module loader, and a corrupt or incomplete ``kernel.so.json``, or a deleted ``kernel.so``,
gave ``JSONDecodeError`` / ``KeyError`` / ``FileNotFoundError`` on every run. Each damaged case
runs in its own process (a regression would crash it): it must compile, compute the right
answer, and say once that the entry was rebuilt.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsetir.backend.cache import LIBRARY_BYTES, LIBRARY_SHA256, REQUIRED_MANIFEST_KEYS, entry_problem, library_record

# Compiles a small SpMM (through the op-level index, as users do) and checks it against scipy.
PROGRAM = textwrap.dedent("""
    import warnings
    warnings.simplefilter("default")
    import numpy as np
    import scipy.sparse as sp
    import sparsetir

    A = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=1)
    B = np.random.default_rng(1).random((30, 8), dtype=np.float32)
    C = sparsetir.compile_spmm(A, 8)(B)
    assert np.allclose(C, A @ B, rtol=1e-4, atol=1e-5), "wrong answer"
    print("correct")
""")


def _run(cache: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARSETIR_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=timeout)


def _entry(cache: Path) -> Path:
    (library,) = (cache / "kernels").glob("*/kernel.so")
    return library


def _warnings(stderr: str, pattern: str) -> list[str]:
    return [line for line in stderr.splitlines() if "KernelCacheWarning" in line and re.search(pattern, line)]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A cache holding one intact entry (and its index), compiled by a separate process."""
    cache = tmp_path_factory.mktemp("pristine-cache")
    result = _run(cache)
    assert result.returncode == 0 and "correct" in result.stdout, result.stderr[-3000:]
    assert entry_problem(_entry(cache)) is None
    return cache


def _copy_cache(pristine: Path, cache: Path) -> None:
    """A copy of the pristine cache whose op-level index points at the copy's own entries."""
    shutil.copytree(pristine, cache)
    for index in (cache / "index").glob("*.json"):
        index.write_text(index.read_text().replace(str(pristine), str(cache)))


def _truncate(library: Path) -> None:
    library.write_bytes(library.read_bytes()[: library.stat().st_size // 3])


def _corrupt_manifest(library: Path) -> None:
    manifest = library.with_name("kernel.so.json")
    manifest.write_text(manifest.read_text()[:40])


def _drop_signature(library: Path) -> None:
    manifest = library.with_name("kernel.so.json")
    document = json.loads(manifest.read_text())
    del document["signature"]
    manifest.write_text(json.dumps(document))


def _delete_library(library: Path) -> None:
    library.unlink()


DAMAGE = {"truncated kernel.so": (_truncate, r"truncated"),
          "corrupt kernel.so.json": (_corrupt_manifest, r"unreadable"),
          "kernel.so.json without its signature": (_drop_signature, r"lacks signature"),
          "kernel.so deleted beside its json": (_delete_library, r"kernel\.so is missing")}


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_rebuilt_with_one_warning(pristine, tmp_path, damage):
    cache = tmp_path / "cache"
    _copy_cache(pristine, cache)
    damage_entry, said = DAMAGE[damage]
    damage_entry(_entry(cache))
    result = _run(cache)
    assert result.returncode == 0, f"exit code {result.returncode} (-7 is SIGBUS):\n{result.stderr[-3000:]}"
    assert "correct" in result.stdout
    assert len(_warnings(result.stderr, "damaged")) == 1, result.stderr[-3000:]
    assert _warnings(result.stderr, said), result.stderr[-3000:]
    assert entry_problem(_entry(cache)) is None  # rebuilt in place
    again = _run(cache)  # and the next process simply uses it
    assert again.returncode == 0 and "correct" in again.stdout and "KernelCacheWarning" not in again.stderr


@pytest.mark.slow
def test_processes_that_meet_one_damaged_entry_at_once_all_succeed(pristine, tmp_path):
    cache = tmp_path / "cache"
    _copy_cache(pristine, cache)
    _truncate(_entry(cache))
    env = {**os.environ, "SPARSETIR_CACHE_DIR": str(cache)}
    processes = [subprocess.Popen([sys.executable, "-c", PROGRAM], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0 and "correct" in out, err[-3000:]
    assert entry_problem(_entry(cache)) is None
    assert not list((cache / "kernels").glob(".*"))  # no workspace or damaged copy left behind


@pytest.mark.slow
def test_an_unusable_cache_folder_falls_back_to_a_private_temporary_cache(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    result = _run(blocker / "cache")  # root ignores permission bits, so a file in the way stands for read-only
    assert result.returncode == 0 and "correct" in result.stdout, result.stderr[-3000:]
    (warning,) = _warnings(result.stderr, "not usable")
    assert "private temporary cache" in warning
    private = Path(re.search(r"temporary cache, (\S+), removed at exit", warning).group(1))
    assert not private.exists()  # removed when the process ended


# Without compiling: any damage to a library or its manifest is found before anything loads it.

def _fake_entry(folder: Path, payload: bytes) -> Path:
    library = folder / "kernel.so"
    library.write_bytes(payload)
    library.with_name("kernel.so.ll").write_text("; generated source")
    manifest = {"format": "sparsetir-function/1", "name": "f", "device": "cpu", "signature": {},
                "source_suffix": ".ll", **library_record(library)}
    library.with_name("kernel.so.json").write_text(json.dumps(manifest))
    return library


@settings(max_examples=60, deadline=None)
@given(payload=st.binary(min_size=1, max_size=4096), data=st.data())
def test_any_truncation_or_changed_byte_of_the_library_is_found(tmp_path_factory, payload, data):
    library = _fake_entry(tmp_path_factory.mktemp("entry"), payload)
    if data.draw(st.booleans(), label="truncate"):
        library.write_bytes(payload[: data.draw(st.integers(0, len(payload) - 1), label="keep")])
    else:
        position = data.draw(st.integers(0, len(payload) - 1), label="position")
        flipped = bytearray(payload)
        flipped[position] ^= data.draw(st.integers(1, 255), label="xor")
        library.write_bytes(bytes(flipped))
    assert re.search(r"truncated|does not match the sha256", entry_problem(library))


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(REQUIRED_MANIFEST_KEYS), junk=st.sampled_from(["", "{", "[]", "null", "\x00\xff"]))
def test_an_incomplete_or_unreadable_manifest_is_found(tmp_path_factory, key, junk):
    library = _fake_entry(tmp_path_factory.mktemp("entry"), b"\x7fELF library bytes")
    manifest = library.with_name("kernel.so.json")
    document = json.loads(manifest.read_text())
    del document[key]
    manifest.write_text(json.dumps(document))
    assert f"lacks {key}" in entry_problem(library)
    manifest.write_text(junk)
    assert "manifest" in entry_problem(library)


def test_a_manifest_records_the_size_and_sha256_of_its_library(tmp_path):
    library = _fake_entry(tmp_path, b"0123456789")
    record = json.loads(library.with_name("kernel.so.json").read_text())
    assert record[LIBRARY_BYTES] == 10
    assert record[LIBRARY_SHA256] == "84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882"
