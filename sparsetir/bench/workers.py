"""A case timed in several fresh worker processes, and what they measured pooled into one set of records.

One process's rounds share its memory placement, page layout, thread placement, allocator state
and clock: its interval says nothing about what changes between processes, which is why a rerun
can fall outside it (pyperf spawns many worker processes per benchmark for the same reason). So
the workflow's case steps call :func:`run_in_workers`: the step's own function runs ``count``
times, one fresh Python process after another (never two at once: they would time each other),
each preparing its contenders, warming up, taking its sentinel baseline and interleaving all
contenders on its share of the samples (``TimingPolicy.for_process``: inside a worker every
policy with ``processes > 1`` is split, ``sparsetir.timing.set_worker_share``). Then
:func:`merge_records` pools them, record by record:

- an ``ok`` record's ``stats`` come from every worker's samples together (median, p20, p80,
  mean, min over all of them; the samples in worker order, so the contenders of a case stay
  paired round by round), ``stats["processes"]`` keeps each worker's ``n``, median, p20 and
  p80, and ``stats["interference"]`` the sentinel's counts summed, contaminated if any worker's
  was (``timing.merge_reports``, each worker's account under ``processes``);
- a record that is not ``ok`` in some worker is not ``ok`` in the merge: the first such
  worker's status and reason (saying which worker, unless every worker said the same);
- everything else (setup and compile times, memory, provenance) is the first worker's, and
  ``provenance["worker_processes"]`` says how many there were, ``provenance["worker_seconds"]``
  how long each took (set-up, checks and timing: the cost of the extra processes).

Workers must write the same records in the same order (same contenders, same cases); a
mismatch raises ``RuntimeError`` naming it.

    records = run_in_workers("rgcn_case:main", kwargs, 3, output=path, search_path=[scripts_dir])

The worker entry point is ``python -m sparsetir.bench.workers REQUEST.json`` (written by
:func:`run_in_workers`; not a command for people).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..timing import Stats, merge_reports, set_worker_share
from .records import validate_record, write_json_atomic

__all__ = ["IDENTITY", "merge_records", "run_in_workers"]

#: The fields that name a record: the workers' records must agree on them, position by position.
IDENTITY = ("experiment", "op", "device", "dataset", "feat", "contender", "case")


def _identity(record: dict) -> tuple:
    return tuple(record.get(key) for key in IDENTITY)


def _pooled_stats(stats: Sequence[dict]) -> dict:
    samples = [float(s) for one in stats for s in one["samples"]]
    per_process = [{"n": int(one["n"]), "median": one["median"], "p20": one["p20"], "p80": one["p80"]}
                   for one in stats]
    interference = merge_reports([one.get("interference") for one in stats if one.get("interference")])
    return Stats.from_samples(samples, interference=interference, processes=per_process).to_dict()


def merge_records(runs: Sequence[Sequence[dict]]) -> list[dict]:
    """One list of records from the workers' lists (see the module docstring)."""
    if not runs:
        raise ValueError("merge_records needs the records of at least one worker")
    first = runs[0]
    for index, run in enumerate(runs[1:], start=1):
        if [_identity(r) for r in run] != [_identity(r) for r in first]:
            raise RuntimeError(f"worker {index + 1} of {len(runs)} wrote other records than worker 1 "
                               f"({len(run)} against {len(first)}; the fields {IDENTITY} must agree in order)")
    merged = []
    for position, record in enumerate(first):
        versions = [run[position] for run in runs]
        failed = next(((i, r) for i, r in enumerate(versions) if r["status"] != "ok"), None)
        base = dict(record)
        if failed is not None:
            index, bad = failed
            agree = all((r["status"], r["reason"]) == (bad["status"], bad["reason"]) for r in versions)
            base.update(status=bad["status"], stats=None, reason=bad["reason"] if agree else
                        f"in worker process {index + 1} of {len(runs)}: {bad['reason']}")
        else:
            base["stats"] = _pooled_stats([r["stats"] for r in versions])
        base["provenance"] = {**record["provenance"], "worker_processes": len(runs)}
        merged.append(validate_record(base))
    return merged


def _request(target: str, kwargs: dict, index: int, count: int, output: Path, search_path: Sequence[str]) -> dict:
    paths = sorted(name for name, value in kwargs.items() if isinstance(value, Path))
    plain = {name: str(value) if isinstance(value, Path) else value for name, value in kwargs.items()}
    return {"target": target, "kwargs": plain, "paths": paths, "index": index, "count": count,
            "output": str(output), "search_path": [str(p) for p in search_path]}


def run_in_workers(target: str, kwargs: dict, count: int, *, output: str | Path,
                   search_path: Sequence[str | Path] = ()) -> list[dict]:
    """Run ``target`` (``"module:function"``, importable once ``search_path`` is on ``sys.path``) as
    ``function(**kwargs, output=<file>)`` in ``count`` fresh processes, one after another; merge the
    records each wrote to its file (:func:`merge_records`), write them to ``output`` and return them.

    ``kwargs`` must be JSON (``pathlib.Path`` values are passed as paths). The workers inherit this
    process's environment and file descriptors (their output goes where this process's goes). A worker
    that exits non-zero raises ``RuntimeError`` naming it; nothing is written then.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"worker count must be an int >= 1, got {count!r}")
    if ":" not in target:
        raise ValueError(f"target must be 'module:function', got {target!r}")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    runs, seconds = [], []
    # in the system's temporary folder, not beside output: a killed run must not leave worker files
    # where the tables step reads records (records/**/*.json)
    with tempfile.TemporaryDirectory(prefix=f"sparsetir-workers-{output.stem}-") as folder:
        for index in range(count):
            part = Path(folder) / f"worker{index}.json"
            request = Path(folder) / f"request{index}.json"
            request.write_text(json.dumps(_request(target, kwargs, index, count, part, search_path)))
            print(f"worker process {index + 1} of {count}: {target}", file=sys.stderr, flush=True)
            started = time.perf_counter()
            code = subprocess.run([sys.executable, "-m", "sparsetir.bench.workers", str(request)], check=False,
                                  env=os.environ.copy()).returncode
            seconds.append(round(time.perf_counter() - started, 3))
            print(f"worker process {index + 1} of {count}: exit status {code} after {seconds[-1]:.1f} s",
                  file=sys.stderr, flush=True)
            if code != 0:
                raise RuntimeError(f"worker process {index + 1} of {count} ({target}) exited with status {code}")
            try:
                runs.append(json.loads(part.read_text()))
            except (OSError, ValueError) as error:
                raise RuntimeError(f"worker process {index + 1} of {count} ({target}) wrote no records: {error}") from None
    records = merge_records(runs)
    for record in records:
        record["provenance"]["worker_seconds"] = seconds
    write_json_atomic(output, records)
    return records


def _worker(request_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    sys.path[:0] = request["search_path"]
    set_worker_share(request["index"], request["count"])
    module, function = request["target"].split(":", 1)
    kwargs = {name: Path(value) if name in request["paths"] and value is not None else value
              for name, value in request["kwargs"].items()}
    getattr(importlib.import_module(module), function)(**kwargs, output=Path(request["output"]))
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
