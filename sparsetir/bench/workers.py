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

:func:`fork_workers` runs the workers as children of a warm parent instead: the caller imports what
every worker needs once (torch, TVM, the baselines: seconds per process), then each worker is an
``os.fork`` of it, one after another, with ``gc.freeze`` so the children do not copy the parent's
pages by collecting them. What the timed part depends on is still fresh in each: the children
allocate their own inputs, kernels, flush buffer and thread pools after the fork (new physical
pages, the allocator in the state the imports left it, threads started anew), and prepare, check,
warm up and take the sentinel's baseline on their own. A parent that already runs a second
thread cannot be forked safely (a lock another thread holds stays held in the child; OpenMP's pool
hangs): then :func:`fork_workers` starts fresh interpreters as :func:`run_in_workers` does, and says so.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from ..timing import Stats, merge_reports, set_worker_share
from .records import validate_record, write_json_atomic

__all__ = ["IDENTITY", "fork_workers", "merge_records", "run_in_workers"]

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


def _check_count(count) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"worker count must be an int >= 1, got {count!r}")


def _run_workers(label: str, count: int, output: Path, launch: Callable[[int, Path], int], how: str) -> list[dict]:
    """``launch(index, part)`` for each worker in turn (its exit status), then the merged records."""
    output.parent.mkdir(parents=True, exist_ok=True)
    runs, seconds = [], []
    # in the system's temporary folder, not beside output: a killed run must not leave worker files
    # where the tables step reads records (records/**/*.json)
    with tempfile.TemporaryDirectory(prefix=f"sparsetir-workers-{output.stem}-") as folder:
        for index in range(count):
            part = Path(folder) / f"worker{index}.json"
            print(f"worker process {index + 1} of {count} ({how}): {label}", file=sys.stderr, flush=True)
            started = time.perf_counter()
            code = launch(index, part)
            seconds.append(round(time.perf_counter() - started, 3))
            print(f"worker process {index + 1} of {count}: exit status {code} after {seconds[-1]:.1f} s",
                  file=sys.stderr, flush=True)
            if code != 0:
                raise RuntimeError(f"worker process {index + 1} of {count} ({label}) exited with status {code}")
            try:
                runs.append(json.loads(part.read_text()))
            except (OSError, ValueError) as error:
                raise RuntimeError(f"worker process {index + 1} of {count} ({label}) wrote no records: {error}") from None
    records = merge_records(runs)
    for record in records:
        record["provenance"]["worker_seconds"] = seconds
        record["provenance"]["worker_start"] = how
    write_json_atomic(output, records)
    return records


def run_in_workers(target: str, kwargs: dict, count: int, *, output: str | Path,
                   search_path: Sequence[str | Path] = ()) -> list[dict]:
    """Run ``target`` (``"module:function"``, importable once ``search_path`` is on ``sys.path``) as
    ``function(**kwargs, output=<file>)`` in ``count`` fresh processes, one after another; merge the
    records each wrote to its file (:func:`merge_records`), write them to ``output`` and return them.

    ``kwargs`` must be JSON (``pathlib.Path`` values are passed as paths). The workers inherit this
    process's environment and file descriptors (their output goes where this process's goes). A worker
    that exits non-zero raises ``RuntimeError`` naming it; nothing is written then.
    """
    _check_count(count)
    if ":" not in target:
        raise ValueError(f"target must be 'module:function', got {target!r}")

    def launch(index: int, part: Path) -> int:
        request = part.with_name(f"request{index}.json")
        request.write_text(json.dumps(_request(target, kwargs, index, count, part, search_path)))
        return subprocess.run([sys.executable, "-m", "sparsetir.bench.workers", str(request)], check=False,
                              env=os.environ.copy()).returncode

    return _run_workers(target, count, Path(output), launch, "spawned")


def threads_running() -> int:
    """This process's threads (``/proc/self/task``; Python's own count where /proc is missing)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading  # noqa: PLC0415

        return threading.active_count()


def fork_workers(function: Callable[..., object], kwargs: dict, count: int, *, output: str | Path,
                 known_threads: int = 1, fallback: str | None = None,
                 search_path: Sequence[str | Path] = ()) -> list[dict]:
    """``function(**kwargs, output=<file>)`` in ``count`` children forked from this (warm) process, one
    after another, merged and written as :func:`run_in_workers` does (the module docstring).

    ``known_threads``: the threads this process may run and still be forked (the main one, plus pools
    that stop themselves at a fork: OpenBLAS's, which numpy starts at import, does through
    ``pthread_atfork``; the caller counts them right after importing numpy). ``fallback``: the
    ``"module:function"`` target (with ``search_path``) that :func:`run_in_workers` starts in fresh
    interpreters when more threads run (a thread pool started by a parallel call, a library's own
    thread) or there is no ``os.fork``; ``RuntimeError`` then when it is None.
    """
    _check_count(count)
    threads = threads_running()
    if not hasattr(os, "fork") or threads > known_threads:
        why = (f"{threads} threads run in this process ({known_threads} expected)" if hasattr(os, "fork")
               else "no os.fork here")
        if fallback is None:
            raise RuntimeError(f"cannot fork worker processes: {why}")
        print(f"note: worker processes started fresh, not forked: {why}", file=sys.stderr, flush=True)
        return run_in_workers(fallback, kwargs, count, output=output,
                              search_path=search_path)

    def launch(index: int, part: Path) -> int:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the parent's code
            code = 1
            try:
                gc.unfreeze()
                set_worker_share(index, count)
                function(**kwargs, output=part)
                code = 0
            except BaseException:  # noqa: BLE001 - reported, and the exit status says it failed
                traceback.print_exc()
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except Exception:  # noqa: BLE001, S110 - nothing left to tell it to
                        pass
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    gc.collect()
    gc.freeze()  # the children share the parent's objects without copying their pages to collect them
    try:
        return _run_workers(getattr(function, "__qualname__", repr(function)), count, Path(output), launch, "forked")
    finally:
        gc.unfreeze()


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
