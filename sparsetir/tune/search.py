"""Search strategies over a :class:`SearchSpace`: exhaustive, random, evolutionary.

Each proposes the next batch of unseen candidates from the measurements so far;
the tuner stops them on its budget (seconds and trials).
"""

from __future__ import annotations

import random

from .space import SearchSpace, config_key

STRATEGIES = ("auto", "exhaustive", "random", "evolutionary")
ELITE = 4  # evolutionary: the best this many measured candidates are mutated
EXPLORE = 0.25  # evolutionary: this share of each batch is drawn at random
EXHAUSTIVE_MAX = 48  # "auto": spaces up to this size (or up to ``trials``) are searched exhaustively


class Search:
    """Proposes batches of unseen candidates; ``tell`` it the measured medians (None: failed)."""

    def __init__(self, space: SearchSpace, strategy: str = "auto", *, trials: int | None = None, seed: int = 0):
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if strategy == "auto":
            small = space.size() <= (trials if trials is not None else EXHAUSTIVE_MAX)
            strategy = "exhaustive" if small else "evolutionary"
        self.space, self.strategy = space, strategy
        self.rng = random.Random(seed)
        self.seen: set[str] = set()
        self.medians: list[tuple[float, dict]] = []
        self._ordered = space.candidates() if strategy == "exhaustive" else None

    def tell(self, config: dict, median_s: float | None) -> None:
        if median_s is not None:
            self.medians.append((median_s, config))

    def propose(self, size: int) -> list[dict]:
        """Up to ``size`` unseen candidates (the default first); empty when the space is exhausted."""
        batch: list[dict] = []
        if not self.seen:
            self._take(self.space.default(), batch)
        if self.strategy == "exhaustive":
            for config in self._ordered:
                if len(batch) >= size:
                    break
                self._take(config, batch)
            return batch
        if self.strategy == "evolutionary" and self.medians:
            elite = [config for _, config in sorted(self.medians, key=lambda item: item[0])[:ELITE]]
            mutations = [n for config in elite for n in self.space.neighbours(config)]
            self.rng.shuffle(mutations)
            want = size - max(1, round(size * EXPLORE))
            for config in mutations:
                if len(batch) >= want:
                    break
                self._take(config, batch)
        for _ in range(50 * size):
            if len(batch) >= size:
                break
            self._take(self.space.random(self.rng), batch)
        return batch

    def _take(self, config: dict, batch: list[dict]) -> None:
        key = config_key(config)
        if key not in self.seen:
            self.seen.add(key)
            batch.append(config)
