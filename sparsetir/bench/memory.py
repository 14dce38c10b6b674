"""Peak memory of a family's contenders, each in a fresh process.

A probe host (``python -m sparsetir.bench memory-probe <family>``, :func:`measure_memory`) imports the libraries
and builds the family's inputs (``Family.probe_inputs``), running no torch or TVM op, then forks one
child per contender. The child warms torch up (its thread pool, lazily set-up state: the process's
costs, not the contender's), returns freed heap to the system (``malloc_trim``), reads its resident
set size (RSS) and resets the kernel's peak-RSS counter (``VmHWM``, by writing 5 to
``/proc/self/clear_refs``). It then prepares the contender (conversion, compilation) and runs two
calls. ``peak_bytes`` is the highest RSS during the calls minus the RSS before the preparation,
less the file-backed pages faulted in meanwhile (library code and kernel libraries, which are
shared and clean; they are only added during a probe, so their growth at the end is their growth
at the peak): the anonymous memory the contender keeps (converted graph, modules, kernel arrays)
plus the most its call holds at once. ``peak_rss_bytes`` and ``file_bytes`` give the total and
the file-backed part; ``prepare_peak_bytes`` is the peak of the preparation, ``resident_bytes``
what it keeps. Where ``clear_refs`` cannot be written, a thread samples ``VmRSS`` every
millisecond instead (``method`` says which).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from .case_runner import short_reason

__all__ = ["MEMORY_CALLS", "MEMORY_METHODS", "MEMORY_TIMEOUT_S", "PROBE_COMMAND", "attach_memory", "measure_memory",
           "memory_probe", "probe_host"]

MEMORY_METHODS = {
    "hwm": "VmHWM growth over VmRSS with the inputs built (peak reset through /proc/self/clear_refs, freed heap "
           "returned with malloc_trim first) less file-backed growth, in a fresh forked process per contender",
    "sampled": "highest VmRSS sampled every 1 ms over VmRSS with the inputs built (clear_refs not writable) less "
               "file-backed growth, in a fresh forked process per contender",
}
MEMORY_CALLS = 2  # calls in a memory probe (after the preparation)
MEMORY_TIMEOUT_S = 600  # per contender
_PROBE_PREFIX = "memory-probe: "
PROBE_COMMAND = "memory-probe"  # python -m sparsetir.bench memory-probe <family> ...: the probe host


def _status_kib(field_name: str) -> int:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``)."""
    match = re.search(rf"^{field_name}:\s+(\d+)\s+kB", Path("/proc/self/status").read_text(), flags=re.M)
    if not match:
        raise RuntimeError(f"/proc/self/status has no {field_name}")
    return int(match.group(1))


def _rss_parts() -> dict[str, int]:
    """``VmRSS``, ``RssAnon`` and ``RssFile`` (KiB) of this process."""
    return {name: _status_kib(name) for name in ("VmRSS", "RssAnon", "RssFile")}


def _trim_heap() -> None:
    """Collect garbage and hand freed heap back to the system, so later allocations show in RSS."""
    gc.collect()
    name = ctypes.util.find_library("c")
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(name or "libc.so.6").malloc_trim(0)


def _warm_torch() -> None:
    """Run small torch ops on every thread once (the OpenMP pool, lazy library set-up), so that
    the first contender op of a probe does not book the process's one-off costs to the contender.

    That includes ``torch._dynamo``: torch imports its compiler stack (about 800 modules with sympy, some
    56 MiB) on the first call of any ``torch.library`` custom op, ``torch.compile`` or optimizer step,
    whoever makes it; it is the same for every graph and every contender that calls such an op."""
    import torch  # noqa: PLC0415 - a memory probe has configured its threads before
    import torch._dynamo  # noqa: F401, PLC0415 - torch's lazily imported compiler stack (above)

    a = torch.ones(512, 64)
    index = torch.arange(512) % 7
    torch.zeros(7, 64).index_add_(0, index, a @ torch.ones(64, 64))
    torch.bincount(index)
    torch.bmm(a[:, None], torch.ones(512, 64, 8)).relu_()


def _reset_peak() -> bool:
    """Reset the process's peak RSS (``VmHWM``) to its current RSS; False where that is not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class _RssSampler:
    """The highest ``VmRSS`` a background thread sees, sampling every millisecond (the fallback)."""

    def __init__(self):
        self.peak_kib = _status_kib("VmRSS")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.wait(0.001):
            self.peak_kib = max(self.peak_kib, _status_kib("VmRSS"))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak_kib = max(self.peak_kib, _status_kib("VmRSS"))
        return self.peak_kib


@contextlib.contextmanager
def _peak_rss(method: str):
    """Yields a dict that holds ``peak_kib``, the highest RSS inside the block, once the block ends."""
    result = {}
    if method == "hwm":
        _reset_peak()
        yield result
        result["peak_kib"] = _status_kib("VmHWM")
    else:
        sampler = _RssSampler()
        try:
            yield result
        finally:
            result["peak_kib"] = sampler.stop()


def memory_probe(contender, inputs, *, calls: int = MEMORY_CALLS, threads: int | None = None) -> dict:
    """This process's memory for one contender (see the module docstring). Call it in a fresh process
    (:func:`measure_memory` forks one per contender) whose libraries are imported and inputs built."""
    import torch  # noqa: PLC0415 - loaded by the probe host already, after the thread settings

    if contender.factory is None:
        raise RuntimeError(f"{contender.name} is unavailable: {contender.reason}")
    if threads:
        torch.set_num_threads(threads)
    _warm_torch()
    method = "hwm" if _reset_peak() else "sampled"
    _trim_heap()
    base = _rss_parts()
    with _peak_rss(method) as prepare_peak:
        run = contender.factory(inputs)
    prepared = _rss_parts()
    with _peak_rss(method) as call_peak:
        for _ in range(calls):
            result = run()
            del result
    after = _rss_parts()

    def growth(kib: int) -> int:
        return max(0, kib) * 1024

    # file-backed pages (library code, kernel libraries) are only faulted in during a probe, never
    # dropped, so their growth at the end is their growth at the peak: the rest of the peak is anonymous
    return {"peak_bytes": growth(call_peak["peak_kib"] - base["VmRSS"] - (after["RssFile"] - base["RssFile"])),
            "prepare_peak_bytes": growth(prepare_peak["peak_kib"] - base["VmRSS"]
                                         - (prepared["RssFile"] - base["RssFile"])),
            "resident_bytes": growth(prepared["RssAnon"] - base["RssAnon"]),
            "peak_rss_bytes": growth(call_peak["peak_kib"] - base["VmRSS"]),
            "file_bytes": growth(after["RssFile"] - base["RssFile"]),
            "baseline_rss_bytes": base["VmRSS"] * 1024, "calls": calls, "method": MEMORY_METHODS[method]}


def _probe_in_child(contender, inputs, threads: int, timeout_s: float) -> tuple[int, int]:
    """Fork a child that measures ``contender`` and writes its JSON result to a pipe: ``(pid, read end)``.

    The parent has imported its libraries and built the inputs but run no torch or TVM op, so no
    thread pool exists yet; the child starts its own (torch's OpenMP pool, TVM's) and exits."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        return pid, read_end
    os.close(read_end)
    code = 0
    try:
        signal.alarm(max(1, int(timeout_s)))  # a stuck probe ends; the parent reports it
        result = memory_probe(contender, inputs, threads=threads)
    except BaseException as error:  # everything is reported through the pipe
        result, code = {"error": short_reason(f"{type(error).__name__}: {error}")}, 1
    try:
        with os.fdopen(write_end, "w") as out:
            json.dump(result, out)
    finally:
        os._exit(code)


def _collect_child(pid: int, read_end: int) -> dict:
    with os.fdopen(read_end) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    try:
        return json.loads(text)
    except ValueError:
        if os.WIFSIGNALED(status):
            why = f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            why = f"exited with {os.waitstatus_to_exitcode(status)}"
        return {"error": f"the memory probe {why} before reporting"}


def _median_probe(runs: list[dict]) -> dict:
    """One contender's memory over repeated probes: the run with the median ``peak_bytes``, with every
    run's peak beside it (``peak_bytes_runs``); the first error when no run succeeded."""
    good = sorted((run for run in runs if "peak_bytes" in run), key=lambda run: run["peak_bytes"])
    if not good:
        return runs[0]
    median = dict(good[(len(good) - 1) // 2])
    median["peak_bytes_runs"] = [run["peak_bytes"] for run in good]
    median["failed_runs"] = len(runs) - len(good)
    return median


def measure_memory(family: str, contenders: Sequence, case: dict, *, threads: int, jobs: int = 1, repeats: int = 1,
                   timeout_s: float = MEMORY_TIMEOUT_S) -> dict[str, dict]:
    """Name -> peak memory of each contender of ``family`` on ``case`` (the keyword arguments of the
    family's ``probe_inputs``; see the module docstring).

    One new process (the probe host: ``python -m sparsetir.bench memory-probe``) imports the libraries and
    builds the inputs, then forks one child per contender (``jobs`` at a time), which measures that
    contender alone; with ``repeats`` > 1, that many children per contender, and the median run is
    kept (peaks vary between runs by the thread interleaving and malloc arenas). A contender with no
    ``probe`` (built in-process only, e.g. in a test) gets ``{"error": ...}``, as does one whose child fails."""
    memory = {c.name: {"error": "not measured: this contender has no memory probe"} for c in contenders
              if not c.probe}
    probed = [[c.name, c.probe] for c in contenders if c.probe]
    if not probed:
        return memory
    command = [sys.executable, "-m", "sparsetir.bench", PROBE_COMMAND, family, "--case", json.dumps(case),
               "--threads", str(threads), "--jobs", str(jobs), "--repeats", str(repeats),
               "--spec", json.dumps(probed), "--timeout-s", str(timeout_s)]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=timeout_s * len(probed) * max(1, repeats) + 120)
    except subprocess.TimeoutExpired:
        return {**memory, **{name: {"error": "the memory probe host ran out of time"} for name, _ in probed}}
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(_PROBE_PREFIX):
            return {**memory, **json.loads(line[len(_PROBE_PREFIX):])}
    tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
    reason = short_reason(f"the memory probe host exited with {result.returncode}: {tail}")
    return {**memory, **{name: {"error": reason} for name, _ in probed}}


def attach_memory(family: str, records: list[dict], contenders: Sequence, case: dict, *, threads: int,
                  jobs: int = 1, repeats: int = 1) -> list[dict]:
    """Measure the peak memory of every contender whose record is ``ok`` (those that passed the check and
    were timed) and put it in ``record["memory"]`` (:func:`measure_memory`)."""
    timed = [r for r in records if r["status"] == "ok"]
    if not timed:
        return records
    by_name = {c.name: c for c in contenders}
    unknown = [r["contender"] for r in timed if r["contender"] not in by_name]
    if unknown:
        raise ValueError(f"records of contenders {unknown} that are not among the given contenders")
    memory_of = measure_memory(family, [by_name[r["contender"]] for r in timed], case, threads=threads, jobs=jobs,
                               repeats=repeats)
    for record in timed:
        record["memory"] = memory_of.get(record["contender"])
    return records


def probe_host(declared, *, case: dict, spec: list, threads: int, jobs: int = 1, repeats: int = 1,
               timeout_s: float = MEMORY_TIMEOUT_S) -> int:
    """The probe host (``python -m sparsetir.bench memory-probe``): import what the contenders of family
    ``declared`` need, build the inputs, fork one child per contender, print one JSON line ``{name: memory}``."""
    import torch  # noqa: F401, PLC0415 - after the thread settings; no op runs here before the forks

    results = {}
    try:
        contenders = [declared.probe_contender(name, probe) for name, probe in spec]
        declared.prepare_probe(contenders)
        inputs = declared.probe_inputs(**case)
        tasks = [c for c in contenders for _ in range(max(1, repeats))]
        measured: dict[str, list[dict]] = {c.name: [] for c in contenders}
        for first in range(0, len(tasks), max(1, jobs)):
            batch = tasks[first:first + max(1, jobs)]
            children = [(c.name, _probe_in_child(c, inputs, threads, timeout_s)) for c in batch]
            for name, (pid, read_end) in children:
                measured[name].append(_collect_child(pid, read_end))
        results = {name: _median_probe(runs) for name, runs in measured.items()}
    except Exception as error:
        reason = {"error": short_reason(f"the memory probe host failed: {type(error).__name__}: {error}")}
        results.update({name: reason for name, _ in spec if name not in results})
    print(_PROBE_PREFIX + json.dumps(results), flush=True)
    return 0
