"""The one timer every backend goes through: flush, warm up, sample, keep every sample.

CPU (``time_cpu``, ``time_interleaved``)
    Before every timed call, a buffer twice the size of the last-level cache is rewritten, so
    each call starts from a cold cache, the way a kernel runs after other big kernels. The
    buffer is allocated once per process. Calls are timed with ``time.perf_counter_ns``.
    ``time_interleaved`` times several callables round by round, in a seeded random order per
    round, so an A/B comparison sees the same machine state (frequency, other load).

GPU (``time_cuda``)
    A 256 MiB int8 buffer is ``zero_()``'d before every sample (H200 L2 is ~60 MB); every
    call is bracketed by a pair of CUDA events on the current stream.

Both paths plan the same way (``warmup_calls``, ``sample_calls``): one cold call, a short
probe to estimate the cost of a call, a warm-up of at least ``warmup_s`` seconds and
``min_warmup`` calls, then ``samples`` timed calls, fewer only when ``max_time_s`` would be
exceeded (never fewer than ``min_samples``).
"""

from __future__ import annotations

import math
import os
import platform
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from ..runtime.loader import usable_cores

DEFAULT_LLC_BYTES = 32 << 20  # used when sysfs does not say (the flush is then 64 MiB)
CUDA_FLUSH_BYTES = 256 << 20
PROBE_CALLS = 5
_LLC_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache/index3/size")
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

_cpu_flush_buffers: dict[int, np.ndarray] = {}


@dataclass(frozen=True)
class Stats:
    """Summary of timed samples (seconds). ``mean`` is what the SparseTIR paper reports."""

    median: float
    p20: float
    p80: float
    mean: float
    min: float
    samples: list[float]
    n: int

    @classmethod
    def from_samples(cls, samples: Sequence[float]) -> "Stats":
        """Summarise ``samples`` (seconds); quantiles interpolate linearly, as numpy does."""
        values = np.asarray(samples, dtype=np.float64)
        if values.ndim != 1 or values.size == 0:
            raise ValueError("Stats.from_samples needs a non-empty 1-D sequence of seconds")
        p20, median, p80 = np.quantile(values, [0.2, 0.5, 0.8])
        return cls(
            median=float(median),
            p20=float(p20),
            p80=float(p80),
            mean=float(values.mean()),
            min=float(values.min()),
            samples=[float(s) for s in values],
            n=int(values.size),
        )

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- planning (shared by CPU/GPU)


def warmup_calls(per_call_s: float, warmup_s: float, min_warmup: int) -> int:
    """Calls needed to warm up for at least ``warmup_s`` seconds and ``min_warmup`` calls."""
    if per_call_s <= 0:
        return min_warmup
    return max(min_warmup, math.ceil(warmup_s / per_call_s))


def sample_calls(per_sample_s: float, samples: int, max_time_s: float | None, min_samples: int) -> int:
    """``samples``, reduced so the samples fit in ``max_time_s``, but at least ``min_samples``."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if max_time_s is None or per_sample_s <= 0:
        return samples
    fitting = int(max_time_s / per_sample_s)
    return min(samples, max(min_samples, fitting))


# ---------------------------------------------------------------- CPU


def llc_bytes() -> int:
    """Size of the last-level cache from sysfs (``32768K`` style), else ``DEFAULT_LLC_BYTES``."""
    try:
        text = _LLC_SYSFS.read_text().strip().upper()
    except OSError:
        return DEFAULT_LLC_BYTES
    digits = text.rstrip("KMGB").rstrip()
    unit = text[len(digits):].rstrip("B").strip()
    if not digits.isdigit() or unit not in _SIZE_UNITS:
        return DEFAULT_LLC_BYTES
    return int(digits) * _SIZE_UNITS[unit]


def default_flush_bytes() -> int:
    """Twice the last-level cache."""
    return 2 * llc_bytes()


def cpu_flush_buffer(nbytes: int | None = None) -> np.ndarray:
    """The process-wide flush buffer of ``nbytes`` (default 2x LLC), allocated on first use."""
    nbytes = default_flush_bytes() if nbytes is None else int(nbytes)
    if nbytes <= 0:
        raise ValueError(f"flush buffer size must be positive, got {nbytes}")
    buffer = _cpu_flush_buffers.get(nbytes)
    if buffer is None:
        buffer = np.ones(nbytes, dtype=np.uint8)  # touches every page now, not in a sample
        _cpu_flush_buffers[nbytes] = buffer
    return buffer


def flush_cpu_cache(buffer: np.ndarray) -> None:
    """Rewrite every byte of ``buffer`` with ordinary loads and stores.

    A read-modify-write ufunc is used rather than ``fill``/memset, because large memsets may
    use non-temporal stores that bypass the cache and would leave it warm.
    """
    np.add(buffer, 1, out=buffer)


def time_cpu(
    fn: Callable[[], object],
    *,
    flush: bool = True,
    flush_bytes: int | None = None,
    warmup_s: float = 0.025,
    min_warmup: int = 10,
    samples: int = 100,
    max_time_s: float | None = None,
    min_samples: int = 10,
) -> Stats:
    """Time ``fn()`` on the CPU: cache flush before every sample, warm-up by time and count."""
    return time_interleaved(
        {"fn": fn},
        flush=flush,
        flush_bytes=flush_bytes,
        warmup_s=warmup_s,
        min_warmup=min_warmup,
        samples=samples,
        max_time_s=max_time_s,
        min_samples=min_samples,
    )["fn"]


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    *,
    flush: bool = True,
    flush_bytes: int | None = None,
    warmup_s: float = 0.025,
    min_warmup: int = 10,
    samples: int = 100,
    max_time_s: float | None = None,
    min_samples: int = 10,
    seed: int = 0,
) -> dict[str, Stats]:
    """Time several callables round by round; each round calls each once, in a random order.

    Every callable gets the same number of samples. ``max_time_s`` bounds the sampling phase
    as a whole (all callables and flushes together), as estimated from the warm-up probe.
    """
    if not fns:
        raise ValueError("time_interleaved needs at least one callable")
    buffer = cpu_flush_buffer(flush_bytes) if flush else None
    flush_s = _probe_flush_seconds(buffer)

    per_call_s = {name: _warm_up_cpu(fn, buffer, warmup_s, min_warmup) for name, fn in fns.items()}
    per_round_s = sum(per_call_s.values()) + len(fns) * flush_s
    rounds = sample_calls(per_round_s, samples, max_time_s, min_samples)

    order = list(fns)
    rng = random.Random(seed)
    timings: dict[str, list[float]] = {name: [] for name in fns}
    clock = time.perf_counter_ns
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            fn = fns[name]
            if buffer is not None:
                flush_cpu_cache(buffer)
            start = clock()
            fn()
            timings[name].append((clock() - start) * 1e-9)
    return {name: Stats.from_samples(timings[name]) for name in fns}


def _probe_flush_seconds(buffer: np.ndarray | None) -> float:
    if buffer is None:
        return 0.0
    start = time.perf_counter_ns()
    flush_cpu_cache(buffer)
    return (time.perf_counter_ns() - start) * 1e-9


def _warm_up_cpu(fn, buffer, warmup_s: float, min_warmup: int) -> float:
    """One cold call, a flushed probe, then the warm-up; returns the probed seconds per call."""
    fn()
    probe_ns = 0
    for _ in range(PROBE_CALLS):
        if buffer is not None:
            flush_cpu_cache(buffer)
        start = time.perf_counter_ns()
        fn()
        probe_ns += time.perf_counter_ns() - start
    per_call_s = probe_ns * 1e-9 / PROBE_CALLS
    for _ in range(warmup_calls(per_call_s, warmup_s, min_warmup)):
        fn()
    return per_call_s


# ---------------------------------------------------------------- GPU


class TorchCudaDevice:
    """The device behind ``time_cuda``: torch CUDA events on the current stream."""

    def __init__(self):
        try:
            import torch
        except ImportError as error:
            raise RuntimeError(f"time_cuda needs a CUDA GPU through torch, and torch is not importable: {error}") from None
        if not torch.cuda.is_available():
            raise RuntimeError(
                "time_cuda needs a CUDA GPU, but torch.cuda.is_available() is False "
                f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})"
            )
        self._torch = torch
        self._flush_buffers: dict[int, object] = {}

    def event(self):
        return self._torch.cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()

    def flush_buffer(self, nbytes: int):
        """An int8 device buffer of ``nbytes``, allocated once per size."""
        if nbytes not in self._flush_buffers:
            self._flush_buffers[nbytes] = self._torch.empty(nbytes, dtype=self._torch.int8, device="cuda")
        return self._flush_buffers[nbytes]


_torch_cuda_device: TorchCudaDevice | None = None


def time_cuda(
    fn: Callable[[], object],
    *,
    flush_bytes: int = CUDA_FLUSH_BYTES,
    warmup_s: float = 0.025,
    min_warmup: int = 10,
    samples: int = 100,
    max_time_s: float | None = None,
    min_samples: int = 10,
    device=None,
) -> Stats:
    """Time ``fn()`` on the GPU with CUDA events, zeroing an L2 flush buffer before each sample.

    ``device`` is for tests: any object with ``event()`` (``record()``, ``elapsed_time(end)``
    in ms), ``synchronize()`` and ``flush_buffer(nbytes)`` (``zero_()``). By default it is the
    process's ``TorchCudaDevice``; that raises ``RuntimeError`` when CUDA is unavailable.
    """
    global _torch_cuda_device
    if device is None:
        if _torch_cuda_device is None:
            _torch_cuda_device = TorchCudaDevice()
        device = _torch_cuda_device
    flush = device.flush_buffer(flush_bytes)

    fn()
    device.synchronize()
    start, end = device.event(), device.event()
    start.record()
    for _ in range(PROBE_CALLS):
        flush.zero_()
        fn()
    end.record()
    device.synchronize()
    per_sample_s = start.elapsed_time(end) * 1e-3 / PROBE_CALLS  # includes the flush

    for _ in range(warmup_calls(per_sample_s, warmup_s, min_warmup)):
        fn()
    pairs = [(device.event(), device.event()) for _ in range(sample_calls(per_sample_s, samples, max_time_s, min_samples))]
    for begin, finish in pairs:
        flush.zero_()
        begin.record()
        fn()
        finish.record()
    device.synchronize()
    return Stats.from_samples([begin.elapsed_time(finish) * 1e-3 for begin, finish in pairs])


# ---------------------------------------------------------------- provenance

_VERSIONED_PACKAGES = {"numpy": "numpy", "scipy": "scipy", "torch": "torch", "tvm": "apache-tvm", "tvm_ffi": "apache-tvm-ffi"}
_THREAD_ENV = ("GOMP_SPINCOUNT", "TVM_THREAD_POOL_SPIN_COUNT", "OMP_NUM_THREADS", "TVM_NUM_THREADS", "MKL_NUM_THREADS")


def package_versions() -> dict:
    """Python's version and those of the packages timings depend on (None when not installed),
    from package metadata, so nothing heavy is imported."""
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for key, distribution in _VERSIONED_PACKAGES.items():
        try:
            versions[key] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            versions[key] = None
    return versions


def environment_info(*, flush: bool = True, flush_bytes: int | None = None) -> dict:
    """Provenance for a timing record: versions, CPU, threads, spin settings, flush.

    Versions come from package metadata, so nothing heavy is imported; torch's thread count
    and CUDA details are included only when torch is already imported.
    """
    info = {
        "versions": package_versions(),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cores(),
        "llc_bytes": llc_bytes(),
        "env": {name: os.environ.get(name) for name in _THREAD_ENV},
        "flush": flush,
        "flush_bytes": (default_flush_bytes() if flush_bytes is None else int(flush_bytes)) if flush else 0,
        "timer": "time.perf_counter_ns",
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_threads"] = torch.get_num_threads()
        info["versions"]["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name()
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
