"""The tuning database: one JSON object per line in ``$SPARSETIR_CACHE_DIR/tune/database.jsonl``.

A record holds the key (op, matrix fingerprint, feature size, dtype, target, versions),
the best configuration found and its measurement. Records are appended under an
exclusive lock, so concurrent tuners never interleave lines; a lookup returns the
most recent record for the key. Lines that do not parse are skipped with a warning
(a killed writer can leave at most its own line incomplete).
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


def tuning_key(op: str, fingerprint: dict, feat: int, dtype: str, target: dict) -> dict:
    """Everything a tuned configuration depends on, with the versions that produced it."""
    return {"op": op, "fingerprint": fingerprint, "feat": int(feat), "dtype": dtype,
            "target": dict(sorted(target.items())), "versions": {"sparsetir": __version__,
                                                                 "tvm": tvm.__version__}}


def key_hash(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


class TuningDatabase:
    """Append-only JSON lines of tuning records, looked up by key hash."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else database_path()

    def add(self, key: dict, config: dict, *, median_s: float | None, source: str, **details) -> dict:
        """Append a record for ``key``; returns it."""
        record = {"key_hash": key_hash(key), "key": key, "config": config, "median_s": median_s,
                  "source": source, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **details}
        line = json.dumps(record, sort_keys=True) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        return record

    def records(self) -> list[dict]:
        """Every well-formed record, oldest first."""
        if not self.path.exists():
            return []
        records = []
        with open(self.path, encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)
            try:
                lines = handle.readlines()
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
                    raise ValueError("not a record object with a config")
                records.append(record)
            except ValueError as error:
                warnings.warn(f"{self.path}:{number}: skipping a malformed tuning record ({error})", stacklevel=2)
        return records

    def lookup(self, key: dict) -> dict | None:
        """The most recent record for ``key``, or None."""
        wanted = key_hash(key)
        matches = [record for record in self.records() if record.get("key_hash") == wanted]
        return matches[-1] if matches else None
