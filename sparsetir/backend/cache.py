"""Compiled-kernel cache: in memory per process, and on disk under ``$SPARSETIR_CACHE_DIR``.

Entries are keyed by a hash of the scheduled TensorIR, the target and the
versions, so a changed schedule or compiler never reuses a stale library. Each
entry is written to a temporary folder and renamed into place, so a killed
build never leaves a half-written entry behind.

An entry is verified before it is used (:func:`entry_problem`): its manifest must parse
and be complete, and the library must have the size and sha256 the manifest records.
A damaged entry (a truncated copy, a full disk, a hand edit) is removed with one
:class:`KernelCacheWarning` and built again. A cache folder that cannot be written
(read-only, or a file in the way) is replaced, for this process and the processes it
starts, by a private temporary folder, again with one warning.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from ..runtime.function import CompiledFunction, sidecar

CACHE_ENV = "SPARSETIR_CACHE_DIR"
#: The manifest keys that record the library's size and sha256 (written by ``compile_module``).
LIBRARY_BYTES, LIBRARY_SHA256 = "library_bytes", "library_sha256"
#: What a cached manifest must hold besides :class:`CompiledFunction`'s own fields.
REQUIRED_MANIFEST_KEYS = ("format", "name", "device", "signature", "source_suffix", LIBRARY_BYTES, LIBRARY_SHA256)


class KernelCacheWarning(RuntimeWarning):
    """The kernel cache met a damaged entry or an unusable folder, and worked around it."""


def configured_cache_dir() -> Path:
    """``$SPARSETIR_CACHE_DIR``, else ``$XDG_CACHE_HOME/sparsetir``, else ``~/.cache/sparsetir``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "sparsetir"


def cache_dir() -> Path:
    """The cache folder in use: :func:`configured_cache_dir` when it can be written, else a private
    temporary folder (see :func:`fall_back_to_private_cache`)."""
    configured = configured_cache_dir()
    if configured not in _usable:
        problem = _unusable(configured)
        if problem is not None:
            return fall_back_to_private_cache(configured, problem)
        _usable.add(configured)
    return configured


_usable: set[Path] = set()


def _unusable(folder: Path) -> str | None:
    """Why ``folder`` cannot hold the cache (it is created if missing), or None."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        return f"{type(error).__name__}: {error}"
    return None


def fall_back_to_private_cache(configured: Path, problem: str) -> Path:
    """Use a fresh private temporary folder as the cache, with one warning naming ``problem``.

    ``$SPARSETIR_CACHE_DIR`` is set to it, so worker processes (the tuner's compile workers)
    share it; it is removed when this process exits.
    """
    folder = Path(tempfile.mkdtemp(prefix="sparsetir-cache-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ[CACHE_ENV] = str(folder)
    _usable.add(folder)
    warnings.warn(f"the sparsetir cache folder {configured} is not usable ({problem}); this process uses a private "
                  f"temporary cache, {folder}, removed at exit (set {CACHE_ENV} to a writable folder to keep "
                  "compiled kernels)", KernelCacheWarning, stacklevel=2)
    return folder


def entry_key(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(part, sort_keys=True, default=str).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def entry_dir(key: str) -> Path:
    return cache_dir() / "kernels" / key


def publish(key: str, write) -> Path:
    """Run ``write(tmp_folder)`` and move the folder to the entry for ``key`` atomically.

    When the cache folder turns out not to be writable, the private temporary cache takes
    over (one warning) and the entry is written there.
    """
    try:
        tmp = _entry_workspace(key)
    except OSError as error:
        fall_back_to_private_cache(configured_cache_dir(), f"{type(error).__name__}: {error}")
        tmp = _entry_workspace(key)
    final = entry_dir(key)
    try:
        write(tmp)
        try:
            os.rename(tmp, final)
        except OSError:  # another process published it first
            if not final.exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _entry_workspace(key: str) -> Path:
    parent = entry_dir(key).parent
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{key}-", dir=parent))


def library_record(library: Path) -> dict:
    """The manifest entries that let a later process verify ``library``: its size and sha256."""
    return {LIBRARY_BYTES: library.stat().st_size, LIBRARY_SHA256: _sha256(library)}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def entry_problem(library: Path) -> str | None:
    """What is wrong with the cached ``library`` and its manifest, or None when it may be loaded.

    Checked without loading anything: the manifest parses and holds :data:`REQUIRED_MANIFEST_KEYS`
    (and a :class:`CompiledFunction` can be made from it), the generated source is present, and
    the library has the size and sha256 the manifest records (a truncated library would crash the
    module loader with SIGBUS).
    """
    library = Path(library)
    manifest_path = sidecar(library, ".json")
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        return f"its manifest {manifest_path.name} is missing"
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return f"its manifest {manifest_path.name} is unreadable ({type(error).__name__}: {error})"
    if not isinstance(manifest, dict):
        return f"its manifest {manifest_path.name} is not a JSON object"
    missing = [key for key in REQUIRED_MANIFEST_KEYS if key not in manifest]
    if missing:
        return f"its manifest {manifest_path.name} lacks {', '.join(missing)}"
    try:
        size = library.stat().st_size
    except OSError:
        return f"{library.name} is missing"
    if size != manifest[LIBRARY_BYTES]:
        return f"{library.name} has {size} bytes but its manifest records {manifest[LIBRARY_BYTES]} (truncated?)"
    try:
        if _sha256(library) != manifest[LIBRARY_SHA256]:
            return f"{library.name} does not match the sha256 its manifest records"
    except OSError as error:
        return f"{library.name} is unreadable ({error})"
    if not isinstance(manifest["source_suffix"], str) or not sidecar(library, manifest["source_suffix"]).is_file():
        return f"its generated source {library.name}{manifest['source_suffix']} is missing"
    try:
        CompiledFunction(library)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        return f"its manifest {manifest_path.name} is incomplete ({type(error).__name__}: {error})"
    return None


def discard_entry(key: str, problem: str) -> None:
    """Remove the damaged entry for ``key`` with one :class:`KernelCacheWarning` naming ``problem``.

    The folder is first renamed aside (atomic), so a concurrent process sees either the
    damaged entry or none, never a half-deleted one.
    """
    folder = entry_dir(key)
    warnings.warn(f"kernel cache entry {folder} is damaged ({problem}); building it again", KernelCacheWarning,
                  stacklevel=3)
    aside = folder.with_name(f".damaged-{key}-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        os.rename(folder, aside)
    except FileNotFoundError:  # another process removed it first
        return
    except OSError:  # no rename here (e.g. read-only): the rebuilt entry cannot replace it
        return
    shutil.rmtree(aside, ignore_errors=True)


def source_digest() -> str:
    """A hash of the compiler's own sources (every ``sparsetir`` module), computed once per process.

    Part of every op-level index key, so an edited lowering or schedule never reuses an
    index entry that points at a kernel built by the old code.
    """
    global _SOURCE_DIGEST
    if _SOURCE_DIGEST is None:
        package = Path(__file__).resolve().parent.parent
        digest = hashlib.sha256()
        for path in sorted(package.rglob("*.py")):
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
        _SOURCE_DIGEST = digest.hexdigest()[:16]
    return _SOURCE_DIGEST


_SOURCE_DIGEST = None


def index_path(*parts) -> Path:
    """Where the op-level index entry for ``parts`` lives (it names a compiled kernel's folder)."""
    return cache_dir() / "index" / f"{entry_key(source_digest(), *parts)}.json"


def index_lookup(*parts) -> Path | None:
    """The kernel library an earlier process compiled for ``parts``, if it is still in the cache and intact.

    A damaged library gives None: the caller compiles again, and ``compile_module`` replaces
    the damaged entry (with a warning).
    """
    path = index_path(*parts)
    try:
        library = Path(json.loads(path.read_text())["library"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return library if entry_problem(library) is None else None


def index_store(library: Path, *parts) -> None:
    """Remember that ``parts`` compiled to ``library`` (written atomically; skipped where it cannot be written)."""
    path = index_path(*parts)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".index-", dir=path.parent)
    except OSError:  # the index only saves lowering work: the kernel itself is cached already
        return
    with os.fdopen(fd, "w") as handle:
        json.dump({"library": str(library), "key": [str(p) for p in parts]}, handle)
    os.replace(tmp, path)
