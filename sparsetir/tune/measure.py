"""Compile candidates in parallel worker processes, then time them through the one timer.

Compiling and timing are separate phases: a batch of candidates is compiled by a pool
of worker processes (``compile_worker``; each fills the on-disk kernel cache), and only then are the
compiled kernels loaded here, checked against the op's float64 reference, and timed
together (``timing.time_interleaved`` with the ``TUNING`` policy: cache flush before every
call).

:meth:`Measurer.measure` does both for one batch. The tuner may also pipeline them: it hands
the next batch to the workers (:meth:`~Measurer.submit`), times the current one
(:meth:`~Measurer.time_compiled`), then waits for the next (:meth:`~Measurer.collect`). While a
batch compiles during timing, the workers' priority is lowered by ``OVERLAP_NICE``
(``os.setpriority``, which on Linux reaches the worker's main thread, where the compiler runs)
so the timing keeps the cores it asks for, and restored afterwards, so a compile the tuner waits
for runs at full priority. Restoring needs the right to raise a priority (root, ``CAP_SYS_NICE``
or ``RLIMIT_NICE``); without it the workers stay at the lower priority.

The workers read the problem from a request folder, ``<tmp>/sparsetir-tune-<pid>-*``, removed
by :meth:`Measurer.close` (or at exit). The process holds a lock on the folder's ``owner.lock``
while it lives, so a folder left behind by a killed run (SIGKILL, power loss) is recognised and
removed when the next tuning run starts (:func:`remove_stale_request_folders`).
"""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..ops import get_op
from ..reference import result_mismatch
from ..timing import TUNING, TimingPolicy, time_interleaved
from .request import write_request

REQUEST_FOLDER_PREFIX = "sparsetir-tune-"
_OWNER_LOCK = "owner.lock"
OVERLAP_NICE = 19  # a batch compiling while the timer samples runs this much lower in priority


def _request_folder() -> tuple[Path, int]:
    """A fresh ``sparsetir-tune-<pid>-*`` folder and the descriptor of its lock, held while this process lives."""
    folder = Path(tempfile.mkdtemp(prefix=f"{REQUEST_FOLDER_PREFIX}{os.getpid()}-"))
    lock = os.open(folder / _OWNER_LOCK, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    return folder, lock


def _release_request_folder(folder: Path, lock: int) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    try:
        os.close(lock)
    except OSError:  # closed already
        pass


def _owner_is_gone(folder: Path) -> bool:
    """Whether the run that made ``folder`` has ended (its lock is free, or, without a lock, its pid is gone)."""
    try:
        lock = os.open(folder / _OWNER_LOCK, os.O_RDWR)
    except FileNotFoundError:  # being created right now, or left by a run before the lock existed
        pid = folder.name[len(REQUEST_FOLDER_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except OSError:  # alive, someone else's
            return False
        return False
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: the run is alive
        return False
    finally:
        os.close(lock)
    return True


def remove_stale_request_folders(root: str | Path | None = None) -> list[Path]:
    """Remove the ``sparsetir-tune-*`` folders in ``root`` (the temp dir) whose run has ended; return them.

    Best effort: a folder that cannot be inspected or removed is left alone.
    """
    root = Path(root if root is not None else tempfile.gettempdir())
    removed = []
    try:
        candidates = [path for path in root.glob(REQUEST_FOLDER_PREFIX + "*") if path.is_dir()]
    except OSError:
        return removed
    for folder in candidates:
        try:
            if folder.stat().st_uid != os.getuid():  # another user's run: not ours to judge
                continue
        except OSError:
            continue
        if _owner_is_gone(folder):
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(folder)
    return removed


@dataclass
class Measurement:
    """One candidate's outcome: its median (seconds) or why it has none."""

    config: dict
    median_s: float | None = None
    stats: dict | None = None
    compile_s: float | None = None
    error: str | None = None
    compiled: bool | None = None  # a worker compiled it without error (None: not compiled by a worker)
    built: bool | None = None  # the kernel library was built for it (False: from the kernel cache)

    def to_dict(self) -> dict:
        return {"config": self.config, "median_s": self.median_s, "compile_s": self.compile_s,
                "error": self.error, "samples": (self.stats or {}).get("n"), "compiled": self.compiled,
                "built": self.built}


class Compiled(NamedTuple):
    """A worker's answer for one candidate: seconds, the error (None: compiled), whether it was built
    now rather than found in the kernel cache (None: unknown or failed)."""

    seconds: float | None
    error: str | None
    built: bool | None = None


@dataclass
class CompileBatch:
    """Candidates handed to the workers by :meth:`Measurer.submit`, answered by :meth:`Measurer.collect`."""

    configs: list[dict]
    pending: dict[int, list[int]]  # worker -> indices of its configs, in order
    results: list[Compiled] = field(default_factory=list)


class Measurer:
    """Compiles (in ``workers`` processes) and times the candidates of one tuning problem."""

    def __init__(self, op: str, matrix, feats, dtype: str, target: dict, *, workers: int, seed: int = 0):
        spec = get_op(op)
        feats = tuple(feats) if isinstance(feats, (tuple, list)) else spec.feature_args(feats)
        self.matrix = matrix
        self.case = spec.reference.make_case(matrix, feats[0] if len(feats) == 1 else tuple(feats),
                                             np.random.default_rng(seed))
        self.kernel = spec.benchmark_kernel  # (A, *inputs, format=..., **knobs) -> run(), as the benchmark
        self.inputs = tuple(np.ascontiguousarray(x.astype(dtype)) for x in self.case.inputs)

        self.workers = workers
        remove_stale_request_folders()  # those of runs that were killed before they could clean up
        folder, lock = _request_folder()
        self._cleanup = weakref.finalize(self, _release_request_folder, folder, lock)
        self._request = folder / "request.npz"
        write_request(self._request, op, matrix, feats, dtype, target)
        self._processes: list[subprocess.Popen] = []
        self._outstanding: CompileBatch | None = None

    def _start_workers(self) -> None:
        command = [sys.executable, "-m", "sparsetir.tune.compile_worker", str(self._request)]
        self._processes = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                            bufsize=1) for _ in range(self.workers)]

    @contextmanager
    def yielding_workers(self):
        """While inside: if a batch is compiling, the workers' priority lowered by ``OVERLAP_NICE``, restored on
        the way out where allowed."""
        if self._outstanding is None or not self._processes:
            yield
            return
        lowered = {}
        for process in self._processes:
            try:
                base = os.getpriority(os.PRIO_PROCESS, process.pid)
                os.setpriority(os.PRIO_PROCESS, process.pid, min(19, base + OVERLAP_NICE))
                lowered[process.pid] = base
            except OSError:  # the worker has exited
                pass
        try:
            yield
        finally:
            for pid, base in lowered.items():
                try:
                    os.setpriority(os.PRIO_PROCESS, pid, base)
                except OSError:  # not allowed to raise a priority again (or exited): it stays lower
                    pass

    def submit(self, configs: list[dict]) -> CompileBatch:
        """Hand ``configs`` to the worker processes (round robin) and return at once.

        One batch is outstanding at a time: collect it before submitting the next.
        """
        if self._outstanding is not None:
            raise RuntimeError("a compile batch is still outstanding: collect it first")
        if not self._processes:
            self._start_workers()
        batch = CompileBatch(list(configs), {}, [Compiled(None, "not compiled")] * len(configs))
        for index, config in enumerate(batch.configs):
            worker = index % len(self._processes)
            self._processes[worker].stdin.write(json.dumps(config) + "\n")
            batch.pending.setdefault(worker, []).append(index)
        for process in self._processes:
            process.stdin.flush()
        self._outstanding = batch
        return batch

    def collect(self, batch: CompileBatch, deadline: float | None = None) -> list[Compiled]:
        """Wait for the workers' answers to ``batch``; one :class:`Compiled` per config.

        Workers still compiling at ``deadline`` (a ``time.monotonic()`` value) are killed and
        their candidates reported as timed out; the next batch starts fresh workers.
        """
        if batch is not self._outstanding:
            raise RuntimeError("this compile batch is not the outstanding one")
        self._outstanding = None
        pending, results = batch.pending, batch.results
        buffers = {worker: b"" for worker in pending}
        broken = False
        with selectors.DefaultSelector() as selector:
            for worker in pending:
                selector.register(self._processes[worker].stdout.fileno(), selectors.EVENT_READ, worker)
            while pending:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                events = selector.select(timeout)
                if not events:  # past the deadline: the unfinished candidates time out
                    for indices in pending.values():
                        for index in indices:
                            results[index] = Compiled(None, "compile timed out (tuning budget spent)")
                    broken = True
                    break
                for key, _ in events:
                    worker = key.data
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:  # the worker died (e.g. a crash inside the compiler)
                        code = self._processes[worker].wait()
                        for index in pending.pop(worker):
                            results[index] = Compiled(None, f"compile worker exited with code {code}")
                        selector.unregister(key.fd)
                        broken = True
                        continue
                    buffers[worker] += chunk
                    while b"\n" in buffers[worker] and worker in pending:
                        line, buffers[worker] = buffers[worker].split(b"\n", 1)
                        answer = json.loads(line)
                        results[pending[worker].pop(0)] = Compiled(answer["compile_s"], answer["error"],
                                                                   answer.get("built"))
                        if not pending[worker]:
                            del pending[worker]
                            selector.unregister(key.fd)
        if broken:
            self.close_workers(kill=True)
        return results

    def abandon(self) -> None:
        """Drop the outstanding batch, if any: its workers are killed (the next batch starts fresh ones)."""
        if self._outstanding is not None:
            self._outstanding = None
            self.close_workers(kill=True)

    def compile(self, configs: list[dict], deadline: float | None = None) -> list[Compiled]:
        """Compile every config in the worker processes (round robin); one :class:`Compiled` each.

        Workers still compiling at ``deadline`` (a ``time.monotonic()`` value) are killed and
        their candidates reported as timed out; the next batch starts fresh workers.
        """
        return self.collect(self.submit(configs), deadline)

    def time_compiled(self, configs: list[dict], compiled: list[Compiled] | None = None,
                      timing: TimingPolicy = TUNING) -> list[Measurement]:
        """Load, check and time ``configs`` together; one Measurement each.

        ``compiled``: the workers' answers (a candidate that failed to compile is not run); None
        when the configs were compiled before (the finalists): they load from the kernel cache.
        """
        results = [Measurement(config) for config in configs]
        for result, answer in zip(results, compiled or ()):
            result.compile_s, result.error, result.built = answer.seconds, answer.error, answer.built
            result.compiled = answer.error is None
        runs = {}
        for index, result in enumerate(results):
            if result.error:
                continue
            try:
                knobs = {k: v for k, v in result.config.items() if k != "format"}
                run = self.kernel(self.matrix, *self.inputs, format=result.config["format"], **knobs)
                got = np.asarray(run(), dtype=np.float64)
            except Exception as error:
                result.error = f"{type(error).__name__}: {error}"
                continue
            result.error = result_mismatch(got, self.case)
            if result.error is None:
                runs[str(index)] = run
        if runs:
            with self.yielding_workers():
                stats = time_interleaved(runs, timing)
            for name, stat in stats.items():
                results[int(name)].median_s = stat.median
                results[int(name)].stats = stat.to_dict()
        return results

    def measure(self, configs: list[dict], timing: TimingPolicy = TUNING, deadline: float | None = None
                ) -> list[Measurement]:
        """Compile (until ``deadline``), check and time ``configs`` together; one Measurement each."""
        return self.time_compiled(configs, self.compile(configs, deadline), timing)

    def close(self) -> None:
        self.abandon()
        self.close_workers()
        self._cleanup()

    def close_workers(self, *, kill: bool = False) -> None:
        for process in self._processes:
            if kill:
                process.kill()
            try:
                process.stdin.close()
            except OSError:  # a killed worker's pipe
                pass
        for process in self._processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stdout.close()
        self._processes = []
