"""Result records: one JSON object per (experiment, dataset, feature size, contender).

A record says what was run, how it went (``status``: ``ok``, ``unavailable``, ``failed`` or
``wrong``, with a ``reason`` unless ok), the timer's statistics (median, p20, p80, mean, min,
n and every sample, in seconds), the preparation times as separate fields (``convert_s``,
``compile_s``, ``tune_s``: ``None`` when a contender has no such step), the minimum bytes the
op must move, the copy bandwidth measured in the same run, and the provenance (versions,
device, clocks where readable, flush, threads). :func:`validate_record` checks all of it and
raises ``ValueError`` naming the first problem. Files are written atomically.

A record whose ``contender`` is ``"*"`` stands for every contender of its case (a dataset
that could not be loaded, for instance).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..timing import environment_info

__all__ = [
    "ALL_CONTENDERS",
    "SCHEMA",
    "STATUSES",
    "gpu_clocks",
    "make_record",
    "provenance",
    "read_records",
    "validate_record",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]

SCHEMA = "sparsetir.bench.record/1"
STATUSES = ("ok", "unavailable", "failed", "wrong")
ALL_CONTENDERS = "*"
_STATS_KEYS = ("median", "p20", "p80", "mean", "min", "n", "samples")
_TIME_KEYS = ("convert_s", "compile_s", "tune_s", "setup_s")
_REQUIRED = {
    "schema": str, "experiment": str, "op": str, "device": str, "dataset": str, "feat": int,
    "contender": str, "status": str, "times": dict, "provenance": dict,
}
_NVIDIA_QUERY = "name,clocks.sm,clocks.mem,temperature.gpu,power.draw,driver_version"


def write_bytes_atomic(path: str | Path, payload: bytes) -> Path:
    """Write ``payload`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    A reader (or a rerun after a kill) sees the old file or the whole new one, never a part.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                     delete=False) as out:
        out.write(payload)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(out.name, 0o666 & ~_umask())  # what open() would have given, not mkstemp's 0600
    os.replace(out.name, path)
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, document) -> Path:
    """Write ``document`` as JSON (no NaN/inf) to ``path`` atomically."""
    return write_text_atomic(path, json.dumps(document, indent=1, allow_nan=False) + "\n")


def gpu_clocks(nvidia_smi: str | None = None, *, run=subprocess.run) -> list[dict] | None:
    """Name, SM/memory clocks, temperature, power and driver of each GPU, or ``None`` without ``nvidia-smi``."""
    nvidia_smi = nvidia_smi or shutil.which("nvidia-smi")
    if not nvidia_smi:
        return None
    try:
        result = run([nvidia_smi, f"--query-gpu={_NVIDIA_QUERY}", "--format=csv,noheader"],
                     capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    keys = _NVIDIA_QUERY.split(",")
    return [dict(zip(keys, (field.strip() for field in line.split(","))))
            for line in result.stdout.splitlines() if line.strip()]


def provenance(*, device: str = "cpu", flush: bool = True, flush_bytes: int | None = None, extra: dict | None = None) -> dict:
    """Everything a record carries about where and how it was measured."""
    info = environment_info(flush=flush, flush_bytes=flush_bytes)
    info.update({
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": device,
    })
    if device != "cpu":
        info["gpu_clocks"] = gpu_clocks()
    if extra:
        info.update(extra)
    return info


def make_record(*, experiment: str, op: str, device: str, dataset: str, feat: int, contender: str,
                status: str, provenance: dict, reason: str | None = None, stats: dict | None = None,
                shape=None, nnz: int | None = None, variant: str | None = None, times: dict | None = None,
                min_bytes: int | None = None, flops: int | None = None,
                copy_bytes_per_s: float | None = None) -> dict:
    """Build and validate one record (see the module docstring for the fields)."""
    record = {
        "schema": SCHEMA, "experiment": experiment, "op": op, "device": device, "dataset": dataset,
        "shape": list(shape) if shape is not None else None, "nnz": nnz, "feat": feat,
        "contender": contender, "variant": variant, "status": status, "reason": reason, "stats": stats,
        "times": {key: (times or {}).get(key) for key in _TIME_KEYS},
        "min_bytes": min_bytes, "flops": flops, "copy_bytes_per_s": copy_bytes_per_s,
        "provenance": provenance,
    }
    validate_record(record)
    return record


def _finite_non_negative(value, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite non-negative number, got {value!r}")


def validate_record(record: dict) -> dict:
    """Check a record against the schema; return it, or raise ``ValueError`` naming the problem."""
    if not isinstance(record, dict):
        raise ValueError(f"a record must be a JSON object, got {type(record).__name__}")
    for key, kind in _REQUIRED.items():
        if key not in record:
            raise ValueError(f"record lacks {key!r}")
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            raise ValueError(f"record field {key!r} must be {kind.__name__}, got {record[key]!r}")
    if record["schema"] != SCHEMA:
        raise ValueError(f"record schema is {record['schema']!r}; this harness reads {SCHEMA!r}")
    if record["status"] not in STATUSES:
        raise ValueError(f"record status must be one of {', '.join(STATUSES)}, got {record['status']!r}")
    stats = record.get("stats")
    if record["status"] == "ok":
        if not isinstance(stats, dict):
            raise ValueError("an ok record needs stats")
        missing = [key for key in _STATS_KEYS if key not in stats]
        if missing:
            raise ValueError(f"record stats lack {', '.join(missing)}")
        for key in ("median", "p20", "p80", "mean", "min"):
            _finite_non_negative(stats[key], f"stats.{key}")
        if not stats["p20"] <= stats["median"] <= stats["p80"]:
            raise ValueError(f"stats must satisfy p20 <= median <= p80, got {stats['p20']}, {stats['median']}, {stats['p80']}")
        if stats["n"] != len(stats["samples"]) or stats["n"] < 1:
            raise ValueError(f"stats.n is {stats['n']} but there are {len(stats['samples'])} samples")
    else:
        if not record.get("reason"):
            raise ValueError(f"a record with status {record['status']!r} needs a reason")
        if stats is not None:
            raise ValueError(f"a record with status {record['status']!r} must not carry stats")
    for key in _TIME_KEYS:
        if key not in record["times"]:
            raise ValueError(f"record times lack {key!r} (use null when a contender has no such step)")
        if record["times"][key] is not None:
            _finite_non_negative(record["times"][key], f"times.{key}")
    if record["feat"] < 1:
        raise ValueError(f"feat must be positive, got {record['feat']}")
    for key in ("min_bytes", "flops", "copy_bytes_per_s", "nnz"):
        if record.get(key) is not None:
            _finite_non_negative(record[key], key)
    return record


def read_records(paths: Iterable[str | Path]) -> list[dict]:
    """All records in the given files (each a JSON list of records, or one record), validated."""
    records = []
    for path in paths:
        try:
            document = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise ValueError(f"{path}: unreadable record file: {err}") from None
        for record in document if isinstance(document, list) else [document]:
            try:
                records.append(validate_record(record))
            except ValueError as err:
                raise ValueError(f"{path}: {err}") from None
    return records
