"""How a measurement is taken: one frozen policy object, with the presets the project uses.

Every timed number goes through :mod:`sparsetir.timing.timer` with a :class:`TimingPolicy`:
whether the cache is flushed before each sample, how long and how often to warm up, how many
samples to take and how long sampling may last. The presets name the few policies in use, so
a setting lives in one place:

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
    """

    flush: bool = True
    flush_bytes: int | None = None
    warmup_s: float = 0.025
    min_warmup: int = 10
    samples: int = 100
    max_time_s: float | None = None
    min_samples: int = 10
    seed: int = 0

    def __post_init__(self):
        if not isinstance(self.flush, bool):
            raise TypeError(f"flush must be True or False, got {self.flush!r}")
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


DEFAULT = TimingPolicy()
TUNING = TimingPolicy(samples=15, max_time_s=1.0, min_samples=5, warmup_s=0.01, min_warmup=3)
FINALISTS = TimingPolicy(samples=40, max_time_s=2.0, min_samples=10, warmup_s=0.02, min_warmup=5)
BUNDLE = {
    "cuda": TimingPolicy(samples=100, min_samples=100, max_time_s=1.0, warmup_s=0.025, min_warmup=10),
    "cpu": TimingPolicy(samples=30, min_samples=10, max_time_s=1.0, warmup_s=0.01, min_warmup=3),
}
