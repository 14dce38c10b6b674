"""The interference sentinel: was a round of interleaved timing measured on a quiet machine?

Interleaving makes an A/B ratio fair against slow drifts, but not against a neighbour that
comes and goes: on two cores, one busy process slows a two-thread contender far more than a
one-thread one, and the samples alone cannot tell. So :func:`~sparsetir.timing.time_interleaved`
runs a :class:`Sentinel` beside its rounds. Rounds are judged in *blocks* (one round, or a few
when rounds are so short that judging each would cost more than :data:`BUDGET` of their time).
A block is flagged when, over it,

- **other processes' CPU**: the CPU time of every process but this one (all CPUs' non-idle time
  in ``/proc/stat`` minus this process's ``time.process_time()``) exceeds
  ``policy.other_cpu_limit`` cores;
- **steal**: the hypervisor's steal time (``/proc/stat``) exceeds ``policy.steal_limit`` cores;
- **the probe**: a fixed calibration probe run right after the block (:class:`CalibrationProbe`:
  one memory-bound loop, a copy through the shared last-level cache, and one compute-bound loop,
  ``exp`` over an L1-resident array; each a fraction of a millisecond) takes more than
  ``1 + policy.probe_limit`` times its baseline, the median of :data:`BASELINE_PROBES` probes
  taken before the first round, and does so again when it is rerun at once (a hiccup of the
  probe itself is not the round's).

``/proc/stat`` counts in clock ticks (10 ms), so a short block's CPU shares are uncertain by a
few ticks: the shares are judged over at least :data:`WINDOW_S` of recent wall time (the
block and the ones before it), and :data:`TICK_SLACK` ticks are granted before a share counts.
A busy loop on one core shows as about one core; an idle machine as a few hundredths.

A flagged block is dropped for every contender (the interleaving is what makes the ratios fair)
and run again, up to the policy's repeat bound; :meth:`Sentinel.report` is what the records
keep: the counts, the reasons, the limits and the trace (per block: when it ended, its rounds,
the CPU shares, the probe's two times, whether it was flagged; ``t`` counts from ``t0_unix``,
the Unix time of the sentinel's start, just before the warm-up).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .policy import TimingPolicy

PROBE_COPY_BYTES = 2 << 20  # 2 MiB (4 MiB with its target: past a core's L2, inside the LLC)
PROBE_EXP_ELEMENTS = 4096  # 32 KiB of float64: L1/L2-resident
PROBE_EXP_PASSES = 4
PROBE_REPEATS = 3  # each loop's time is the fastest of this many passes
BASELINE_PROBES = 5
WINDOW_S = 0.25
TICK_SLACK = 3
BUDGET = 0.02  # the sentinel's share of the sampling time it watches
REASONS = ("other_cpu", "steal", "probe")
_PROC_STAT = Path("/proc/stat")
_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
_BUSY_FIELDS = (0, 1, 2, 5, 6)  # user, nice, system, irq, softirq (guest time is inside user)
_STEAL_FIELD = 7


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU counters at one moment: wall seconds (``perf_counter``); all CPUs' non-idle and steal
    seconds (``/proc/stat``, None where unreadable); this process's CPU seconds."""

    wall: float
    busy: float | None
    steal: float | None
    own: float


def read_proc_stat(path: Path = _PROC_STAT) -> tuple[float, float] | None:
    """``(busy, steal)`` seconds of all CPUs from the ``cpu`` line of ``/proc/stat``; None if unreadable."""
    try:
        with open(path, "rb") as handle:
            line = handle.readline()
    except OSError:
        return None
    fields = line.split()
    if len(fields) < 9 or fields[0] != b"cpu":
        return None
    try:
        ticks = [int(value) for value in fields[1:]]
    except ValueError:
        return None
    return sum(ticks[i] for i in _BUSY_FIELDS) * _TICK_S, ticks[_STEAL_FIELD] * _TICK_S


def cpu_snapshot() -> CpuSnapshot:
    counters = read_proc_stat()
    own = time.process_time()
    wall = time.perf_counter()
    if counters is None:
        return CpuSnapshot(wall, None, None, own)
    return CpuSnapshot(wall, counters[0], counters[1], own)


def cpu_shares(start: CpuSnapshot, end: CpuSnapshot, slack_ticks: float = TICK_SLACK) -> tuple[float | None, float | None]:
    """Other processes' CPU and steal between two snapshots, in cores (CPU seconds per wall second),
    less ``slack_ticks`` clock ticks for ``/proc/stat``'s resolution; never below 0. None: unreadable."""
    wall = end.wall - start.wall
    if wall <= 0 or start.busy is None or end.busy is None:
        return None, None
    slack = slack_ticks * _TICK_S
    other = (end.busy - start.busy) - (end.own - start.own)
    steal = end.steal - start.steal
    return max(0.0, other - slack) / wall, max(0.0, steal - slack) / wall


class CalibrationProbe:
    """The fixed probe: ``probe() -> (memory_s, compute_s)``, each the fastest of :data:`PROBE_REPEATS`
    timed passes after an untimed one (a preemption of a few hundred microseconds is not what it is
    looking for; a slower clock or a contended cache slows every pass). The memory-bound loop copies
    :data:`PROBE_COPY_BYTES` (the untimed pass brings them into the last-level cache, whatever the
    rounds left there: the timed ones are bound by its bandwidth); the compute-bound loop is
    :data:`PROBE_EXP_PASSES` passes of ``exp`` over :data:`PROBE_EXP_ELEMENTS` float64. Single-threaded numpy."""

    def __init__(self):
        self._source = np.ones(PROBE_COPY_BYTES, dtype=np.uint8)
        self._target = np.ones(PROBE_COPY_BYTES, dtype=np.uint8)  # ones, not zeros: its pages mapped now
        self._x = np.linspace(-1.0, 1.0, PROBE_EXP_ELEMENTS)
        self._y = np.empty_like(self._x)

    def __call__(self) -> tuple[float, float]:
        clock = time.perf_counter_ns
        np.copyto(self._target, self._source)
        memory = []
        for _ in range(PROBE_REPEATS):
            start = clock()
            np.copyto(self._target, self._source)
            memory.append(clock() - start)
        np.exp(self._x, out=self._y)
        compute = []
        for _ in range(PROBE_REPEATS):
            start = clock()
            for _ in range(PROBE_EXP_PASSES):
                np.exp(self._x, out=self._y)
            compute.append(clock() - start)
        return min(memory) * 1e-9, min(compute) * 1e-9


@dataclass(frozen=True)
class Verdict:
    """The judgement of one block of rounds."""

    flagged: bool
    reasons: tuple[str, ...]
    other_cpu: float | None
    steal: float | None
    probe: tuple[float, float] | None


class Sentinel:
    """Judges blocks of rounds for :func:`~sparsetir.timing.time_interleaved` (see the module docstring).

    ``start()`` before the warm-up (so the first block's CPU window reaches back over it) and takes
    the probe's baseline; ``block_size(round_s)`` is how many rounds to judge at once;
    ``judge(rounds)`` after each block; ``report(...)`` at the end.
    """

    def __init__(self, policy: TimingPolicy):
        self.policy = policy
        self.probe = CalibrationProbe()
        self.baseline: tuple[float, float] | None = None
        self._snapshots: list[CpuSnapshot] = []
        self._origin = 0.0
        self._probe_s = 0.0
        self.trace = {"t0_unix": None, "t": [], "rounds": [], "other_cpu": [], "steal": [], "probe": [], "flagged": []}
        self.reasons = dict.fromkeys(REASONS, 0)

    def start(self) -> None:
        self.probe()  # first touch of its buffers, not part of the baseline
        started = time.perf_counter()
        probes = [self.probe() for _ in range(BASELINE_PROBES)]
        self._probe_s = (time.perf_counter() - started) / BASELINE_PROBES
        self.baseline = (statistics.median(p[0] for p in probes), statistics.median(p[1] for p in probes))
        first = cpu_snapshot()
        self._snapshots = [first]
        self._origin = first.wall
        self.trace["t0_unix"] = round(time.time(), 3)

    def block_size(self, round_s: float) -> int:
        """Rounds per block, so that judging (a probe and a snapshot) costs at most :data:`BUDGET` of them."""
        if round_s <= 0:
            return 1
        return max(1, math.ceil(self._probe_s / (BUDGET * round_s)))

    def _deviates(self, probe: tuple[float, float]) -> bool:
        limit = 1.0 + self.policy.probe_limit
        return bool(self.baseline) and any(base > 0 and got > limit * base for got, base in zip(probe, self.baseline))

    def judge(self, rounds: int) -> Verdict:
        probe = self.probe()
        if self._deviates(probe):  # confirm: the fastest of the two probes must deviate too
            again = self.probe()
            probe = (min(probe[0], again[0]), min(probe[1], again[1]))
        end = cpu_snapshot()
        snapshots = self._snapshots
        start = snapshots[0]
        for snapshot in reversed(snapshots):  # the latest one at least WINDOW_S before the end
            if end.wall - snapshot.wall >= WINDOW_S:
                start = snapshot
                break
        self._snapshots = snapshots[snapshots.index(start):] + [end]  # windows only move forward
        other, steal = cpu_shares(start, end)
        reasons = []
        if other is not None and other > self.policy.other_cpu_limit:
            reasons.append("other_cpu")
        if steal is not None and steal > self.policy.steal_limit:
            reasons.append("steal")
        if self._deviates(probe):
            reasons.append("probe")
        for reason in reasons:
            self.reasons[reason] += rounds
        verdict = Verdict(bool(reasons), tuple(reasons), other, steal, probe)
        trace = self.trace
        trace["t"].append(round(end.wall - self._origin, 6))
        trace["rounds"].append(rounds)
        trace["other_cpu"].append(None if other is None else round(other, 4))
        trace["steal"].append(None if steal is None else round(steal, 4))
        trace["probe"].append([round(probe[0], 9), round(probe[1], 9)])
        trace["flagged"].append(verdict.flagged)
        return verdict

    def report(self, *, rounds: int, kept: int, flagged: int, repeated: int, contaminated: bool,
               flagged_kept: bool = False) -> dict:
        """What a record keeps (``stats["interference"]``): counts, reasons, limits, baseline, trace."""
        return interference_report(
            rounds=rounds, kept=kept, flagged=flagged, repeated=repeated, contaminated=contaminated,
            flagged_kept=flagged_kept, reasons=dict(self.reasons), policy=self.policy,
            baseline=None if self.baseline is None else [round(b, 9) for b in self.baseline], trace=self.trace)


def interference_report(*, rounds: int, kept: int, flagged: int = 0, repeated: int = 0, contaminated: bool = False,
                        flagged_kept: bool = False, reasons: dict | None = None, policy: TimingPolicy | None = None,
                        baseline=None, trace: dict | None = None) -> dict:
    """The ``interference`` dict of a measurement (also for one taken without the sentinel: ``judged`` False).

    ``rounds``: rounds run; ``kept``: the clean rounds the statistics use; ``flagged``: rounds
    flagged; ``repeated``: rounds run to replace flagged ones; ``contaminated``: the flagged rounds
    outnumbered the repeat bound; ``flagged_kept``: too few clean rounds were left, so the
    statistics use flagged rounds too (the earliest, up to the planned count).
    """
    report = {"judged": trace is not None, "rounds": int(rounds), "kept": int(kept), "flagged": int(flagged),
              "repeated": int(repeated), "contaminated": bool(contaminated), "flagged_kept": bool(flagged_kept),
              "reasons": reasons or dict.fromkeys(REASONS, 0)}
    if policy is not None:
        report["limits"] = {"other_cpu": policy.other_cpu_limit, "steal": policy.steal_limit,
                            "probe": policy.probe_limit, "max_repeat_fraction": policy.max_repeat_fraction,
                            "window_s": WINDOW_S, "tick_slack": TICK_SLACK}
    if baseline is not None:
        report["probe_baseline_s"] = baseline
    if trace is not None:
        report["trace"] = trace
    return report


def merge_reports(reports: list[dict]) -> dict:
    """One ``interference`` dict for measurements taken in several processes: counts summed,
    contaminated if any was, the per-process reports kept under ``processes``."""
    reports = [r for r in reports if r]
    if not reports:
        return interference_report(rounds=0, kept=0)
    reasons = dict.fromkeys(REASONS, 0)
    for report in reports:
        for key, value in (report.get("reasons") or {}).items():
            reasons[key] = reasons.get(key, 0) + int(value)
    merged = {"judged": all(r.get("judged", False) for r in reports),
              **{key: sum(int(r.get(key, 0)) for r in reports) for key in ("rounds", "kept", "flagged", "repeated")},
              "contaminated": any(r.get("contaminated", False) for r in reports),
              "flagged_kept": any(r.get("flagged_kept", False) for r in reports), "reasons": reasons}
    if "limits" in reports[0]:
        merged["limits"] = reports[0]["limits"]
    merged["processes"] = reports
    return merged
