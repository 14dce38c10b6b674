"""Compile candidates in parallel worker processes, then time them through the one timer.

Compiling and timing are separate phases: a batch of candidates is compiled by a pool
of worker processes (``compile_worker``; each fills the on-disk kernel cache), and only then are the
compiled kernels loaded here, checked against the op's float64 reference, and timed
together (``timing.time_interleaved`` with the ``TUNING`` policy: cache flush before every
call), so the
cores are never shared between compiling and timing.

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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..ops import get_op
from ..reference import result_mismatch
from ..timing import TUNING, TimingPolicy, time_interleaved
from .request import write_request

REQUEST_FOLDER_PREFIX = "sparsetir-tune-"
_OWNER_LOCK = "owner.lock"


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

    def to_dict(self) -> dict:
        return {"config": self.config, "median_s": self.median_s, "compile_s": self.compile_s,
                "error": self.error, "samples": (self.stats or {}).get("n")}


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

    def compile(self, configs: list[dict], deadline: float | None = None) -> list[tuple[float | None, str | None]]:
        """Compile every config in the worker processes (round robin); (seconds, error) each.

        Workers still compiling at ``deadline`` (a ``time.monotonic()`` value) are killed and
        their candidates reported as timed out; the next batch starts fresh workers.
        """
        if not self._processes:
            self._processes = [subprocess.Popen([sys.executable, "-m", "sparsetir.tune.compile_worker",
                                                 str(self._request)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                text=True, bufsize=1) for _ in range(self.workers)]
        pending: dict[int, list[int]] = {}  # worker -> indices of its configs, in order
        for index, config in enumerate(configs):
            worker = index % len(self._processes)
            self._processes[worker].stdin.write(json.dumps(config) + "\n")
            pending.setdefault(worker, []).append(index)
        for process in self._processes:
            process.stdin.flush()
        results: list[tuple[float | None, str | None]] = [(None, "not compiled")] * len(configs)
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
                            results[index] = (None, "compile timed out (tuning budget spent)")
                    broken = True
                    break
                for key, _ in events:
                    worker = key.data
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:  # the worker died (e.g. a crash inside the compiler)
                        code = self._processes[worker].wait()
                        for index in pending.pop(worker):
                            results[index] = (None, f"compile worker exited with code {code}")
                        selector.unregister(key.fd)
                        broken = True
                        continue
                    buffers[worker] += chunk
                    while b"\n" in buffers[worker] and worker in pending:
                        line, buffers[worker] = buffers[worker].split(b"\n", 1)
                        answer = json.loads(line)
                        results[pending[worker].pop(0)] = (answer["compile_s"], answer["error"])
                        if not pending[worker]:
                            del pending[worker]
                            selector.unregister(key.fd)
        if broken:
            self.close_workers(kill=True)
        return results

    def measure(self, configs: list[dict], timing: TimingPolicy = TUNING, deadline: float | None = None
                ) -> list[Measurement]:
        """Compile (until ``deadline``), check and time ``configs`` together; one Measurement each."""
        results = [Measurement(config) for config in configs]
        for result, (seconds, error) in zip(results, self.compile(configs, deadline)):
            result.compile_s, result.error = seconds, error
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
            stats = time_interleaved(runs, timing)
            for name, stat in stats.items():
                results[int(name)].median_s = stat.median
                results[int(name)].stats = stat.to_dict()
        return results

    def close(self) -> None:
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
        self._processes = []
