"""The one timer every backend goes through: flush, warm up, sample, keep every sample.

CPU (``time_cpu``, ``time_interleaved``)
    Before every timed call, a buffer twice the size of the last-level cache is rewritten, so
    each call starts from a cold cache, the way a kernel runs after other big kernels. The
    buffer is allocated once per process. Calls are timed with ``time.perf_counter_ns``.
    ``time_interleaved`` times several callables round by round, in a seeded random order per
    round, so an A/B comparison sees the same machine state (frequency, other load). Its rounds
    are judged by the interference sentinel (:mod:`sparsetir.timing.interference`): a round during
    which other processes used the CPU, the hypervisor stole time or the calibration probe ran
    slow is dropped for every contender and repeated, up to the policy's bound; every ``Stats``
    carries the account (``interference``). With ``policy.strict`` a busy machine is refused
    before the first call (:mod:`sparsetir.timing.machine`).

GPU (``time_cuda``)
    A 256 MiB int8 buffer is ``zero_()``'d before every sample (H200 L2 is ~60 MB); every
    call is bracketed by a pair of CUDA events on the current stream.

Both paths take their settings from one :class:`~sparsetir.timing.policy.TimingPolicy` and
plan the same way (``warmup_calls``, ``sample_calls``): one cold call, a short probe to
estimate the cost of a call, a warm-up of at least ``warmup_s`` seconds and ``min_warmup``
calls, then ``samples`` timed calls, fewer only when ``max_time_s`` would be exceeded (never
fewer than ``min_samples``). On the CPU the probe's calls are not flushed (the flush is timed
once on its own), and the plan is revised after every block of rounds from their measured time.

    stats = time_interleaved({"ours": run_a, "theirs": run_b}, TUNING)   # a preset
    stats = time_cpu(run_a, samples=20)                                  # DEFAULT with a change
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .interference import Sentinel, interference_report
from .policy import DEFAULT, TimingPolicy, share_of

DEFAULT_LLC_BYTES = 32 << 20  # used when sysfs does not say (the flush is then 64 MiB)
CUDA_FLUSH_BYTES = 256 << 20
PROBE_CALLS = 5
_LLC_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache/index3/size")
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

_cpu_flush_buffers: dict[int, np.ndarray] = {}


@dataclass(frozen=True)
class Stats:
    """Summary of timed samples (seconds). ``mean`` is what the SparseTIR paper reports.

    ``interference`` is the sentinel's account of the measurement (``interference.interference_report``:
    rounds run, kept, flagged and repeated, whether it is contaminated, and the trace); ``processes``,
    when the samples come from several worker processes (``sparsetir.bench.workers``), holds each
    one's ``{"n", "median", "p20", "p80"}`` in the order its samples appear in ``samples``.
    """

    median: float
    p20: float
    p80: float
    mean: float
    min: float
    samples: list[float]
    n: int
    interference: dict | None = None
    processes: list[dict] | None = None

    @classmethod
    def from_samples(cls, samples: Sequence[float], *, interference: dict | None = None,
                     processes: list[dict] | None = None) -> Stats:
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
            interference=interference,
            processes=processes,
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


def time_cpu(fn: Callable[[], object], policy: TimingPolicy = DEFAULT, **changes) -> Stats:
    """Time ``fn()`` on the CPU under ``policy`` (with ``changes`` applied, e.g. ``samples=20``)."""
    return time_interleaved({"fn": fn}, policy, **changes)["fn"]


def time_interleaved(fns: Mapping[str, Callable[[], object]], policy: TimingPolicy = DEFAULT,
                     **changes) -> dict[str, Stats]:
    """Time several callables round by round; each round calls each once, in a random order.

    Before every timed call the cache is flushed (``policy.flush``). Every callable gets the
    same rounds: with ``policy.sentinel``, rounds are judged in blocks and a flagged block is
    dropped for all of them and run again, at most ``ceil(policy.max_repeat_fraction * rounds)``
    extra rounds; past that bound the measurement is *contaminated* (its statistics use the clean
    rounds or, when fewer than half the planned ones are clean, the clean rounds and the earliest
    flagged ones up to the planned count, and ``flagged_kept`` says so). Each ``Stats`` carries
    the account in ``interference``. ``policy.max_time_s`` bounds the planned sampling as a whole
    (all callables and flushes together), estimated from the warm-up probe, then from the rounds'
    measured time. ``changes`` are fields of :class:`TimingPolicy` that override ``policy`` for
    this call. ``policy.strict`` raises ``MachineBusyError`` on a busy machine before any call.
    Inside one of a case's worker processes (``policy.set_worker_share``) a policy with
    ``processes > 1`` is timed as that worker's share of the samples.
    """
    policy = share_of(policy.replace(**changes) if changes else policy)
    if not fns:
        raise ValueError("time_interleaved needs at least one callable")
    if policy.strict:
        from .machine import require_quiet_machine  # noqa: PLC0415 - psutil, only when asked

        require_quiet_machine(policy)
    sentinel = Sentinel(policy) if policy.sentinel else None
    if sentinel is not None:
        sentinel.start()  # before the warm-up, so the first block's CPU window reaches back over it
    buffer = cpu_flush_buffer(policy.flush_bytes) if policy.flush else None
    flush_s = _probe_flush_seconds(buffer)

    per_call_s = {name: _warm_up_cpu(fn, policy.warmup_s, policy.min_warmup) for name, fn in fns.items()}
    per_round_s = sum(per_call_s.values()) + len(fns) * flush_s

    def plan(round_s: float) -> tuple[int, int]:
        rounds = sample_calls(round_s, policy.samples, policy.max_time_s, policy.min_samples)
        return rounds, (math.ceil(policy.max_repeat_fraction * rounds) if sentinel is not None else 0)

    planned, bound = plan(per_round_s)
    block = sentinel.block_size(per_round_s) if sentinel is not None else planned

    order = list(fns)
    rng = random.Random(policy.seed)
    kept: dict[str, list[float]] = {name: [] for name in fns}
    blocks: list[tuple[bool, dict[str, list[float]]]] = []  # (flagged, timings), in the order they ran
    kept_rounds = attempted = flagged = 0
    sampling_ns = 0
    clock = time.perf_counter_ns
    while kept_rounds < planned and attempted < planned + bound:
        size = min(block, planned - kept_rounds, planned + bound - attempted)
        timings: dict[str, list[float]] = {name: [] for name in fns}
        began = clock()
        for _ in range(size):
            rng.shuffle(order)
            for name in order:
                fn = fns[name]
                if buffer is not None:
                    flush_cpu_cache(buffer)
                start = clock()
                fn()
                timings[name].append((clock() - start) * 1e-9)
        sampling_ns += clock() - began
        attempted += size
        verdict = sentinel.judge(size) if sentinel is not None else None
        blocks.append((verdict is not None and verdict.flagged, timings))
        if verdict is not None and verdict.flagged:
            flagged += size
        else:
            for name in fns:
                kept[name] += timings[name]
            kept_rounds += size
        planned, bound = plan(sampling_ns * 1e-9 / attempted)

    contaminated = kept_rounds < planned
    flagged_kept = contaminated and kept_rounds < math.ceil(planned / 2)
    counts = dict(rounds=attempted, kept=kept_rounds, flagged=flagged, contaminated=contaminated,
                  repeated=min(flagged, max(0, attempted - planned)), flagged_kept=flagged_kept)
    report = sentinel.report(**counts) if sentinel is not None else interference_report(**counts)
    chosen = _topped_up(blocks, fns, planned - kept_rounds) if flagged_kept else kept
    return {name: Stats.from_samples(chosen[name], interference=report) for name in fns}


def _topped_up(blocks, fns, room: int) -> dict[str, list[float]]:
    """The clean rounds and the earliest ``room`` flagged ones, in the order they ran."""
    chosen: dict[str, list[float]] = {name: [] for name in fns}
    for flagged, timings in blocks:
        take = len(next(iter(timings.values())))
        if flagged:
            take = min(take, room)
            room -= take
        for name in fns:
            chosen[name] += timings[name][:take]
    return chosen


def _probe_flush_seconds(buffer: np.ndarray | None) -> float:
    if buffer is None:
        return 0.0
    start = time.perf_counter_ns()
    flush_cpu_cache(buffer)
    return (time.perf_counter_ns() - start) * 1e-9


def _warm_up_cpu(fn, warmup_s: float, min_warmup: int) -> float:
    """One cold call, a probe, then the warm-up; returns the probed seconds per call.

    The probe's calls are not flushed: the flush is timed once on its own (``_probe_flush_seconds``),
    a flush per probe call would cost more than the probe (a 2x LLC rewrite is 10-150 ms), and the
    plan is revised from the rounds' measured time anyway.
    """
    fn()
    probe_ns = 0
    for _ in range(PROBE_CALLS):
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
            import torch  # noqa: PLC0415 - the GPU timer only; CPU timing never loads torch
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


def time_cuda(fn: Callable[[], object], policy: TimingPolicy = DEFAULT, *, device=None, **changes) -> Stats:
    """Time ``fn()`` on the GPU with CUDA events, zeroing an L2 flush buffer before each sample.

    ``policy.flush_bytes`` defaults to ``CUDA_FLUSH_BYTES``; ``policy.flush`` is ignored (the
    GPU timing rules always flush). ``device`` is for tests: any object with ``event()``
    (``record()``, ``elapsed_time(end)`` in ms), ``synchronize()`` and ``flush_buffer(nbytes)``
    (``zero_()``). By default it is the process's ``TorchCudaDevice``; that raises
    ``RuntimeError`` when CUDA is unavailable.
    """
    policy = policy.replace(**changes) if changes else policy
    global _torch_cuda_device
    if device is None:
        if _torch_cuda_device is None:
            _torch_cuda_device = TorchCudaDevice()
        device = _torch_cuda_device
    flush = device.flush_buffer(policy.flush_bytes or CUDA_FLUSH_BYTES)

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

    for _ in range(warmup_calls(per_sample_s, policy.warmup_s, policy.min_warmup)):
        fn()
    pairs = [(device.event(), device.event()) for _ in range(sample_calls(per_sample_s, policy.samples, policy.max_time_s,
                                                                      policy.min_samples))]
    for begin, finish in pairs:
        flush.zero_()
        begin.record()
        fn()
        finish.record()
    device.synchronize()
    return Stats.from_samples([begin.elapsed_time(finish) * 1e-3 for begin, finish in pairs])
