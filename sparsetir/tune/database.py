"""The tuning database: one JSON object per line in ``$SPARSETIR_CACHE_DIR/tune/database.jsonl``.

A record holds the key (op, matrix fingerprint, feature size, dtype, target, versions),
the best configuration found and its measurement. Records are appended under an
exclusive lock, so concurrent tuners never interleave lines; a lookup returns the
most recent record for the key.

A killed writer can leave its own line incomplete; the next append starts on a fresh line, so
no record is glued to a partial one. Malformed records (not JSON, not an object, a ``config``
that is not a non-empty object naming its ``format``) are skipped with one warning per read and
never returned, so ``format="auto"`` never sees them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
import warnings
from pathlib import Path

import tvm

from ..backend.cache import cache_dir
from ..version import __version__

DATABASE_NAME = "database.jsonl"
DATABASE_ENV = "SPARSETIR_TUNE_DATABASE"


def database_path() -> Path:
    """Where the database lives: ``$SPARSETIR_TUNE_DATABASE``, else ``<cache dir>/tune/database.jsonl``."""
    if os.environ.get(DATABASE_ENV):
        return Path(os.environ[DATABASE_ENV])
    return cache_dir() / "tune" / DATABASE_NAME


def tuning_key(op: str, fingerprint: dict, feat, dtype: str, target: dict) -> dict:
    """Everything a tuned configuration depends on, with the versions that produced it (``feat``: an
    int, or a list of the op's feature sizes where it has several)."""
    feat = [int(f) for f in feat] if isinstance(feat, (list, tuple)) else int(feat)
    return {"op": op, "fingerprint": fingerprint, "feat": feat, "dtype": dtype,
            "target": dict(sorted(target.items())), "versions": {"sparsetir": __version__,
                                                                 "tvm": tvm.__version__}}


def key_hash(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def config_problem(config) -> str | None:
    """Why ``config`` cannot be a tuned configuration (a non-empty object with a ``format`` string), or None."""
    if not isinstance(config, dict) or not config:
        return f"the config must be a non-empty object, got {config!r}"[:200]
    if not isinstance(config.get("format"), str) or not config["format"]:
        return f"the config names no format: {config!r}"[:200]
    return None


def record_problem(record) -> str | None:
    """Why a database line's object is not a usable record, or None."""
    if not isinstance(record, dict):
        return f"not a record object ({type(record).__name__})"
    if not isinstance(record.get("key_hash"), str):
        return "no key_hash"
    return config_problem(record.get("config"))


class TuningDatabase:
    """Append-only JSON lines of tuning records, looked up by key hash."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else database_path()

    def add(self, key: dict, config: dict, *, median_s: float | None, source: str, **details) -> dict:
        """Append a record for ``key`` (on a line of its own); returns it.

        A database that cannot be written gives one warning: the record is returned, not kept.
        """
        problem = config_problem(config)
        if problem is not None:
            raise ValueError(f"not a tuning configuration: {problem}")
        record = {"key_hash": key_hash(key), "key": key, "config": config, "median_s": median_s,
                  "source": source, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **details}
        line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab+") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    end = handle.seek(0, os.SEEK_END)
                    if end:  # a killed writer may have left a partial last line: end it first
                        handle.seek(end - 1)
                        if handle.read(1) != b"\n":
                            line = b"\n" + line
                    handle.write(line)  # append mode: always at the end
                    handle.flush()
                    os.fsync(handle.fileno())
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        except OSError as error:
            warnings.warn(f"{self.path}: could not record the tuning result ({type(error).__name__}: {error}); "
                          f"it is used now but not kept (set {DATABASE_ENV} to a writable file)", stacklevel=2)
        return record

    def records(self) -> list[dict]:
        """Every well-formed record, oldest first; the malformed ones are skipped with one warning."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as handle:
                fcntl.flock(handle, fcntl.LOCK_SH)
                try:
                    lines = handle.readlines()
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        except FileNotFoundError:
            return []
        records, skipped = [], []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                skipped.append(f"line {number}: not JSON ({error})")
                continue
            problem = record_problem(record)
            if problem is None:
                records.append(record)
            else:
                skipped.append(f"line {number}: {problem}")
        if skipped:
            shown = "; ".join(skipped[:3]) + (f"; and {len(skipped) - 3} more" if len(skipped) > 3 else "")
            warnings.warn(f"{self.path}: skipped {len(skipped)} malformed tuning record(s) ({shown})", stacklevel=2)
        return records

    def lookup(self, key: dict) -> dict | None:
        """The most recent record for ``key``, or None."""
        wanted = key_hash(key)
        matches = [record for record in self.records() if record.get("key_hash") == wanted]
        return matches[-1] if matches else None
