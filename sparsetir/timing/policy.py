"""How a measurement is taken: one frozen policy object, with the presets the project uses.

Every timed number goes through :mod:`sparsetir.timing.timer` with a :class:`TimingPolicy`:
whether the cache is flushed before each sample, how long and how often to warm up, how many
samples to take and how long sampling may last; how the interference sentinel judges a round
(:mod:`sparsetir.timing.interference`) and how often a flagged round is repeated; whether a busy
machine is refused outright (``strict``); and across how many fresh worker processes a case
runner splits the samples (``processes``, :mod:`sparsetir.bench.workers`). The presets name the
few policies in use, so a setting lives in one place:

==================  ====================================================================
``DEFAULT``         a benchmark measurement (100 samples, 25 ms / 10 calls of warm-up)
``TUNING``          the tuner's short measurement of each candidate
``FINALISTS``       the tuner's re-timing of its best candidates, with more samples
``BUNDLE["cpu"]``   a GPU bundle run on a CPU host (testing the runner)
``BUNDLE["cuda"]``  a GPU bundle run on the GPU host (100 samples, as the paper's artifact)
==================  ====================================================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TimingPolicy:
    """The settings of one measurement.

    Parameters
    ----------
    flush : bool
        Evict the caches before every timed call (CPU: rewrite a buffer of twice the
        last-level cache; GPU: zero a 256 MiB buffer).
    flush_bytes : int or None
        The flush buffer's size; None takes the device's default.
    warmup_s, min_warmup : float, int
        Warm up for at least this many seconds and calls.
    samples : int
        Timed calls per callable.
    max_time_s : float or None
        Cap on the estimated sampling time; fewer samples then, but never fewer than
        ``min_samples``.
    min_samples : int
        The fewest samples ``max_time_s`` may leave.
    seed : int
        Seed of the random call order of interleaved timing.
    sentinel : bool
        Judge every round (:mod:`sparsetir.timing.interference`): the CPU time other processes
        used and the steal time during it (``/proc/stat``), and a short calibration probe (a
        memory-bound and a compute-bound loop) between rounds against the case's own baseline. A
        flagged round is dropped for every contender and repeated.
    other_cpu_limit : float
        A round is flagged when other processes used more than this many cores during it
        (0.25: a quarter of one core).
    steal_limit : float
        A round is flagged when the hypervisor stole more than this many cores during it.
    probe_limit : float
        A round is flagged when either probe loop took more than ``1 + probe_limit`` times its
        baseline (the median of the probes taken before the first round), twice in a row. 1.0:
        twice the baseline; on the 2-core development VM, idle, the probe after a 600 MiB flush
        runs at 0.9-1.2x its baseline, with rare confirmed excursions to 1.9x.
    max_repeat_fraction : float
        The repeat bound: at most ``ceil(max_repeat_fraction * rounds)`` rounds are run to
        replace flagged ones (0: flag, never repeat). When the flagged rounds outnumber it, the
        case is marked contaminated.
    strict : bool
        Refuse to time (``MachineBusyError``, naming what is busy) when the machine check
        (:mod:`sparsetir.timing.machine`) finds the machine busy before the first round.
    processes : int
        Fresh worker processes a case runner times each case in (:mod:`sparsetir.bench.workers`,
        each with its own warm-up and sentinel baseline, interleaving all contenders); the
        samples, the minimum and the time cap are split between them (:meth:`for_process`), and
        the records pool them. ``time_interleaved`` itself always runs in the calling process:
        inside a worker (:func:`set_worker_share`) a policy with ``processes > 1`` takes that worker's
        share, elsewhere it runs whole. Default 1; default.yaml sets 2 for the attention, rgcn and conv cases, full.yaml 3.
    """

    flush: bool = True
    flush_bytes: int | None = None
    warmup_s: float = 0.025
    min_warmup: int = 10
    samples: int = 100
    max_time_s: float | None = None
    min_samples: int = 10
    seed: int = 0
    sentinel: bool = True
    other_cpu_limit: float = 0.25
    steal_limit: float = 0.1
    probe_limit: float = 1.0
    max_repeat_fraction: float = 0.5
    strict: bool = False
    processes: int = 1

    def __post_init__(self):
        for name in ("flush", "sentinel", "strict"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        for name in ("other_cpu_limit", "steal_limit", "probe_limit", "max_repeat_fraction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if isinstance(self.processes, bool) or not isinstance(self.processes, int) or self.processes < 1:
            raise ValueError(f"processes must be an int >= 1, got {self.processes!r}")
        for name in ("min_warmup", "samples", "min_samples", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if self.samples < 1 or self.min_samples < 1:
            raise ValueError(f"samples and min_samples must be >= 1, got {self.samples} and {self.min_samples}")
        if isinstance(self.warmup_s, bool) or not isinstance(self.warmup_s, (int, float)) or self.warmup_s < 0:
            raise ValueError(f"warmup_s must be a number of seconds >= 0, got {self.warmup_s!r}")
        if self.max_time_s is not None and (isinstance(self.max_time_s, bool)
                                            or not isinstance(self.max_time_s, (int, float)) or self.max_time_s <= 0):
            raise ValueError(f"max_time_s must be a positive number of seconds or None, got {self.max_time_s!r}")
        if self.flush_bytes is not None and (isinstance(self.flush_bytes, bool)
                                             or not isinstance(self.flush_bytes, int) or self.flush_bytes < 1):
            raise ValueError(f"flush_bytes must be a positive int or None, got {self.flush_bytes!r}")

    def replace(self, **changes) -> TimingPolicy:
        """This policy with ``changes`` (field names of this class) applied; unknown names raise TypeError."""
        unknown = sorted(set(changes) - {field.name for field in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"unknown timing setting(s) {unknown}; known: {[f.name for f in dataclasses.fields(self)]}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(cls, settings: Mapping | TimingPolicy | None, base: TimingPolicy | None = None) -> TimingPolicy:
        """A policy from a mapping of settings (e.g. a workflow config's ``timing``) on top of ``base``."""
        if isinstance(settings, TimingPolicy):
            return settings
        return (base or cls()).replace(**dict(settings or {}))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


    def for_process(self, index: int, count: int | None = None) -> TimingPolicy:
        """The share of worker process ``index`` (0-based) of ``count`` (default ``processes``):
        the samples, the minimum and the time cap split between them (the first ones take a
        remainder), a seed of its own, and ``processes=1``."""
        count = self.processes if count is None else count
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"process count must be an int >= 1, got {count!r}")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise ValueError(f"process index must lie in 0..{count - 1}, got {index!r}")

        def share(total: int) -> int:
            return max(1, total // count + (index < total % count))

        return self.replace(samples=share(self.samples), min_samples=share(self.min_samples),
                            max_time_s=None if self.max_time_s is None else self.max_time_s / count,
                            seed=self.seed + index, processes=1)


_worker: tuple[int, int] | None = None


def set_worker_share(index: int, count: int) -> None:
    """Mark this process as worker ``index`` (0-based) of the ``count`` a case is timed in
    (``sparsetir.bench.workers`` does, in each worker it starts): from now on every policy with
    ``processes > 1`` is timed as its :meth:`TimingPolicy.for_process` share (:func:`share_of`);
    a policy with ``processes == 1`` (the tuner's) runs whole."""
    global _worker
    TimingPolicy(processes=count).for_process(index)  # the same checks, ValueError naming the value
    _worker = (index, count)


def clear_worker_share() -> None:
    """Leave worker mode: every policy runs whole again."""
    global _worker
    _worker = None


def worker_share() -> tuple[int, int] | None:
    """``(index, count)`` inside a case's worker process, else None."""
    return _worker


def share_of(policy: TimingPolicy) -> TimingPolicy:
    """``policy`` as this process times it: its worker share inside a worker when ``processes > 1``."""
    if _worker is None or policy.processes == 1:
        return policy
    return policy.for_process(_worker[0], _worker[1])


DEFAULT = TimingPolicy()
# The tuner's measurements run under a time budget: rounds are judged and flagged, never repeated.
TUNING = TimingPolicy(samples=15, max_time_s=1.0, min_samples=5, warmup_s=0.01, min_warmup=3, max_repeat_fraction=0.0)
FINALISTS = TimingPolicy(samples=40, max_time_s=2.0, min_samples=10, warmup_s=0.02, min_warmup=5)
BUNDLE = {
    "cuda": TimingPolicy(samples=100, min_samples=100, max_time_s=1.0, warmup_s=0.025, min_warmup=10),
    "cpu": TimingPolicy(samples=30, min_samples=10, max_time_s=1.0, warmup_s=0.01, min_warmup=3),
}
