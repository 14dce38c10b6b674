"""Speedups with their spread: a bootstrap interval over the interleaved rounds, and a verdict.

The timer measures the contenders of a case round by round (``timing.time_interleaved``), so
sample ``i`` of every contender comes from the same round, under the same machine state. A
speedup is the ratio of the medians, ``median(reference) / median(contender)``; its interval
resamples the rounds (pairs kept together) ``BOOTSTRAP`` times and takes the 5th and 95th
percentiles of the ratio (a 90% interval). When the rounds come from several worker processes
(``groups``: each process's round count, from the records' ``stats["processes"]``), each
replicate first draws the processes with replacement, then rounds within each drawn process, so
the interval holds what changes between processes as well as within one (a two-level
bootstrap). A table's samples can carry their processes' round counts themselves (:class:`Rounds`,
from a record's stats by :func:`rounds_of`): two of them from the same processes are resampled so
without being told. Samples of unequal counts (records from different runs) are resampled
independently. A geometric mean over cases resamples every case at once.

A speedup whose interval lies above 1 is a **win**, below 1 a **loss**, and one that straddles
1 a **tie**: on this machine the p80/p20 spread of one case's timings is often 1.5x or more,
so a 1.2x median ratio alone says little.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP = 1000
LEVEL = 0.90  # the interval's coverage
SEED = 0


@dataclass(frozen=True)
class Interval:
    """A ratio (the medians') and its bootstrap interval; all NaN when it cannot be computed."""

    value: float
    low: float
    high: float

    @property
    def verdict(self) -> str:
        """``win`` (interval above 1), ``loss`` (below 1), ``tie`` (straddles 1) or ``n/a``."""
        if not all(math.isfinite(x) for x in (self.value, self.low, self.high)):
            return "n/a"
        if self.low > 1.0:
            return "win"
        if self.high < 1.0:
            return "loss"
        return "tie"

    def text(self, digits: int = 2) -> str:
        """``1.56× (1.41–1.70)``; ``n/a`` when there is no value."""
        if not math.isfinite(self.value):
            return "n/a"
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return f"{self.value:.{digits}f}×"
        return f"{self.value:.{digits}f}× ({self.low:.{digits}f}–{self.high:.{digits}f})"


NAN = Interval(math.nan, math.nan, math.nan)


class Rounds(list):
    """A record's timing samples (seconds, in round order) with ``groups``: the rounds per worker process
    (``stats["processes"]``), empty when one process timed them."""

    def __init__(self, samples=(), groups=()):
        super().__init__(float(s) for s in samples)
        self.groups = [int(n) for n in groups]


def rounds_of(stats: dict | None) -> Rounds:
    """The samples of a record's ``stats`` with their processes' round counts (:class:`Rounds`)."""
    stats = stats or {}
    processes = stats.get("processes") or []
    samples = list(stats.get("samples") or [])
    groups = [int(p["n"]) for p in processes]
    return Rounds(samples, groups if len(groups) > 1 and sum(groups) == len(samples) else ())


def common_groups(reference_samples, contender_samples) -> list[int] | None:
    """The round counts per process when both samples carry the same ones (:class:`Rounds`), else None."""
    groups = [getattr(samples, "groups", None) for samples in (reference_samples, contender_samples)]
    return groups[0] if groups[0] and len(groups[0]) > 1 and groups[0] == groups[1] else None


def _samples(values) -> np.ndarray | None:
    array = np.asarray(values if values is not None else [], dtype=np.float64).ravel()
    array = array[np.isfinite(array) & (array > 0)]
    return array if array.size else None


def _resampled_ratios(reference: np.ndarray, contender: np.ndarray, rng: np.random.Generator,
                      count: int, groups: Sequence[int] | None = None) -> np.ndarray:
    """``count`` bootstrap replicates of ``median(reference) / median(contender)``."""
    if groups is not None and len(groups) > 1 and reference.size == contender.size == sum(groups):
        starts, sizes = np.cumsum([0, *groups[:-1]]), np.asarray(groups)
        # all replicates at once: processes with replacement, then as many rounds within each drawn process
        # as it has (a slot beyond a smaller process's size is NaN, so the medians skip it)
        drawn = rng.integers(0, len(groups), size=(count, len(groups)))
        drawn_sizes = sizes[drawn][..., None]
        within = np.minimum((rng.random((count, len(groups), int(sizes.max()))) * drawn_sizes).astype(np.int64),
                            drawn_sizes - 1)
        index = (starts[drawn][..., None] + within).reshape(count, -1)
        used = (np.arange(int(sizes.max())) < drawn_sizes).reshape(count, -1)
        return (np.nanmedian(np.where(used, reference[index], np.nan), axis=1)
                / np.nanmedian(np.where(used, contender[index], np.nan), axis=1))
    if reference.size == contender.size:  # interleaved rounds: resample the pairs together
        index = rng.integers(0, reference.size, size=(count, reference.size))
        return np.median(reference[index], axis=1) / np.median(contender[index], axis=1)
    ref_index = rng.integers(0, reference.size, size=(count, reference.size))
    con_index = rng.integers(0, contender.size, size=(count, contender.size))
    return np.median(reference[ref_index], axis=1) / np.median(contender[con_index], axis=1)


def _bounds(replicates: np.ndarray) -> tuple[float, float]:
    tail = (1.0 - LEVEL) / 2.0 * 100.0
    low, high = np.percentile(replicates, [tail, 100.0 - tail])
    return float(low), float(high)


def ratio_interval(reference_samples, contender_samples, *, seed: int = SEED, count: int = BOOTSTRAP,
                   groups: Sequence[int] | None = None) -> Interval:
    """The speedup of a contender over a reference from their timing samples (seconds); ``groups``:
    the rounds per worker process, in order, when both come from the same processes."""
    groups = groups if groups is not None else common_groups(reference_samples, contender_samples)
    reference, contender = _samples(reference_samples), _samples(contender_samples)
    if reference is None or contender is None:
        return NAN
    value = float(np.median(reference) / np.median(contender))
    if reference.size < 2 or contender.size < 2:
        return Interval(value, math.nan, math.nan)
    low, high = _bounds(_resampled_ratios(reference, contender, np.random.default_rng(seed), count, groups))
    return Interval(value, min(low, value), max(high, value))


def geomean(values) -> float:
    """The geometric mean of the finite, positive ``values`` (missing ones skipped); NaN when none is."""
    kept = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    return math.exp(sum(map(math.log, kept)) / len(kept)) if kept else math.nan


def number_cell(value, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals for a table; "—" when it is missing or not finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}"


def geomean_interval(pairs: Sequence[tuple], *, seed: int = SEED, count: int = BOOTSTRAP) -> Interval:
    """The geometric mean of the speedups of ``(reference_samples, contender_samples)`` pairs (or
    ``(reference_samples, contender_samples, groups)``), with an interval that resamples every case
    in each replicate. Pairs without samples are skipped; when a case has a single round, there is
    nothing to resample: the geomean has no interval (NaN bounds) rather than a zero-width one."""
    rng = np.random.default_rng(seed)
    logs, replicate_logs = [], []
    single_round = False
    for reference_samples, contender_samples, *rest in pairs:
        groups = rest[0] if rest else common_groups(reference_samples, contender_samples)
        reference, contender = _samples(reference_samples), _samples(contender_samples)
        if reference is None or contender is None:
            continue
        logs.append(math.log(np.median(reference) / np.median(contender)))
        if reference.size >= 2 and contender.size >= 2:
            replicate_logs.append(np.log(_resampled_ratios(reference, contender, rng, count, groups)))
        else:
            single_round = True
    if not logs:
        return NAN
    value = math.exp(sum(logs) / len(logs))
    if single_round:
        return Interval(value, math.nan, math.nan)
    low, high = _bounds(np.exp(np.mean(replicate_logs, axis=0)))
    return Interval(value, min(low, value), max(high, value))


def verdict_counts(intervals: Sequence[Interval]) -> dict:
    """``{"win": .., "tie": .., "loss": ..}`` over the intervals that have a verdict."""
    counts = {"win": 0, "tie": 0, "loss": 0}
    for interval in intervals:
        if interval.verdict in counts:
            counts[interval.verdict] += 1
    return counts
