"""Shared test set-up: a kernel cache for the session, the real-data mirror, and test helpers on sys.path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# No property test has a speed limit: hypothesis's default deadline (200 ms an example) fails whenever
# the machine is busy, so it is off for every test that does not set its own (speed is for benchmarks).
settings.register_profile("sparsetir", deadline=None)
settings.load_profile("sparsetir")

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MIRROR = REPO_ROOT.parent / "shared" / "data"

# Compiled kernels are cached on disk (keyed by a hash of the scheduled IR), so subprocess
# tests and repeated runs reuse them. The folder is git-ignored.
os.environ.setdefault("SPARSETIR_CACHE_DIR", str(REPO_ROOT / ".cache" / "test-kernels"))
if DEFAULT_MIRROR.is_dir():
    os.environ.setdefault("SPARSETIR_DATA_MIRROR", str(DEFAULT_MIRROR))
# Dataset downloads go to a cache inside the checkout, and are off unless a test turns them on
# (the download tests serve files from 127.0.0.1); nothing in the suite reaches the network.
os.environ.setdefault("SPARSETIR_DATA_CACHE", str(REPO_ROOT / ".cache" / "test-data"))
os.environ.setdefault("SPARSETIR_DATA_DOWNLOAD", "0")
# The workflow's data pre-flight checks that download servers can be reached; not from the tests.
os.environ.setdefault("SPARSETIR_DATA_NETWORK_CHECK", "0")
sys.path.insert(0, str(Path(__file__).parent / "helpers"))

from sparsetir.data import MIRROR_ENV, clear_caches  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def kernel_index_per_mutant():
    """Under mutmut (``make mutate``, docs/mutation.md), give each mutant its own op-level kernel index.

    The index maps an op's key to a kernel an earlier process built and is keyed by a digest of the
    sources, which is the same for every mutant (mutmut switches mutants at run time), so a mutant of
    the lowering or of a format would reuse the unmutated kernel. Compiled kernels are keyed by their
    own IR and stay shared: every entry of the cache but ``index`` is linked into the mutant's folder.
    """
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if "__mutmut_" not in mutant:
        yield
        return
    shared = Path(os.environ["SPARSETIR_CACHE_DIR"])
    private = shared / "per-mutant" / mutant
    private.mkdir(parents=True, exist_ok=True)
    (shared / "kernels").mkdir(exist_ok=True)
    for entry in shared.iterdir():
        if entry.name not in ("index", "per-mutant") and not (private / entry.name).exists():
            (private / entry.name).symlink_to(entry)
    os.environ["SPARSETIR_CACHE_DIR"] = str(private)
    yield
    os.environ["SPARSETIR_CACHE_DIR"] = str(shared)


@pytest.fixture(scope="session")
def mirror_path() -> Path:
    """The real-data mirror: ``$SPARSETIR_DATA_MIRROR``, else ``../shared/data`` next to the repo."""
    value = os.environ.get(MIRROR_ENV, "").strip()
    path = Path(value).expanduser() if value else DEFAULT_MIRROR
    if not path.is_dir():
        source = f"{MIRROR_ENV}={value!r}" if value else f"{MIRROR_ENV} is unset and {DEFAULT_MIRROR}"
        pytest.skip(f"no real-data mirror: {source} is not a directory")
    return path.resolve()


EMBEDDED_DATA = REPO_ROOT / "data"


def _real_mirror() -> Path | None:
    """The mirror the registry sees (``$SPARSETIR_DATA_MIRROR``: set above to ``../shared/data`` where it exists)."""
    value = os.environ.get(MIRROR_ENV, "").strip()
    path = Path(value).expanduser() if value else None
    return path.resolve() if path is not None and path.is_dir() else None


@pytest.fixture(scope="session")
def real_file():
    """``real_file(relpath)``: a real data file, the mirror's copy or else the embedded ``data/`` one (the
    same bytes: both are checked against one sha256); skips, saying why, when neither has it."""
    mirror = _real_mirror()  # as the session starts: a test may have pointed the registry elsewhere since

    def find(relpath: str) -> Path:
        for folder in ([mirror] if mirror else []) + [EMBEDDED_DATA]:
            if (folder / relpath).is_file():
                return folder / relpath
        where = f"the mirror {mirror}" if mirror else f"a real-data mirror ({MIRROR_ENV} is unset or not a folder)"
        pytest.skip(f"{relpath} is neither embedded in data/ nor in {where}")
    return find


@pytest.fixture
def real_data(monkeypatch, real_file):
    """The registry's real routes for one test: the embedded ``data/`` folder and the mirror where there is
    one. ``real_data(name)`` skips the test unless every file of dataset ``name`` is on one of them."""
    from sparsetir.data import EMBEDDED_ENV, entry

    monkeypatch.delenv(EMBEDDED_ENV, raising=False)
    clear_caches()

    def need(name: str) -> None:
        for file in entry(name).files:
            real_file(file.relpath)
    yield need
    clear_caches()


@pytest.fixture
def use_mirror(monkeypatch, mirror_path) -> Path:
    """Point the registry at the real mirror for one test."""
    monkeypatch.setenv(MIRROR_ENV, str(mirror_path))
    return mirror_path


@pytest.fixture
def isolated_data(monkeypatch, tmp_path) -> Path:
    """No cache, embedded folder or mirror to fall back on: an empty cache in ``tmp_path/cache``."""
    from sparsetir.data import CACHE_ENV, EMBEDDED_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(EMBEDDED_ENV, "none")
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    clear_caches()
    yield tmp_path / "cache"
    clear_caches()


@pytest.fixture
def fresh_registry_cache():
    """Drop parsed matrices before and after a test that swaps mirrors."""
    clear_caches()
    yield
    clear_caches()
