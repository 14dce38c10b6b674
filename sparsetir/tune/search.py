"""Search strategies over a :class:`SearchSpace`: exhaustive, random, evolutionary.

Each proposes the next batch of unseen candidates from the measurements so far;
the tuner stops them on its budget (seconds and trials).

With a trained cost model (``cost_model.CostModel``), a batch starts with the unseen candidates
the model predicts fastest (from the whole space when it has at most ``POOL_MAX`` candidates,
else from the elite's neighbours and a random sample); the strategy fills the rest of the batch
(evolutionary and random: at least ``EXPLORE`` of it), so the search keeps exploring what the
model has not seen. An untrained model changes nothing. The default configuration is always
the first candidate of the first batch.
"""

from __future__ import annotations

import itertools
import random

from .space import SearchSpace, config_key

STRATEGIES = ("auto", "exhaustive", "random", "evolutionary")
ELITE = 4  # evolutionary: the best this many measured candidates are mutated
EXPLORE = 0.25  # evolutionary: this share of each batch is drawn at random
EXHAUSTIVE_MAX = 48  # "auto": spaces up to this size (or up to ``trials``) are searched exhaustively
POOL_MAX = 8192  # with a cost model: spaces up to this size are ranked whole
POOL_SAMPLES = 2048  # ... larger ones: the elite's neighbours and this many random candidates


class Search:
    """Proposes batches of unseen candidates; ``tell`` it the measured medians (None: failed)."""

    def __init__(self, space: SearchSpace, strategy: str = "auto", *, trials: int | None = None, seed: int = 0,
                 model=None):
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
        self.model = model  # a CostModel (or None): ranks candidates before they are measured
        self._pool: list[dict] | None = None
        self.ranked = 0  # candidates proposed because the model ranked them first

    def tell(self, config: dict, median_s: float | None) -> None:
        if median_s is not None:
            self.medians.append((median_s, config))
        if self.model is not None:
            self.model.observe(config, median_s)

    def propose(self, size: int) -> list[dict]:
        """Up to ``size`` unseen candidates (the default first); empty when the space is exhausted."""
        batch: list[dict] = []
        if not self.seen:
            self._take(self.space.default(), batch)
        if self.model is not None and self.model.update():
            exploit = size if self.strategy == "exhaustive" else size - max(1, round(size * EXPLORE))
            for config in self.model.rank(self._unseen()):
                if len(batch) >= exploit:
                    break
                self._take(config, batch)
                self.ranked += 1
        if self.strategy == "exhaustive":
            while len(batch) < size:  # test before drawing: a drawn candidate is never dropped
                config = next(self._ordered, None)
                if config is None:
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

    def _unseen(self) -> list[dict]:
        """Candidates for the model to rank: every unseen one in a small space, else a sample."""
        if self._pool is None:
            pool = list(itertools.islice(self.space.candidates(), POOL_MAX + 1))
            self._pool = pool if len(pool) <= POOL_MAX else []
        if self._pool:
            return [config for config in self._pool if config_key(config) not in self.seen]
        elite = [config for _, config in sorted(self.medians, key=lambda item: item[0])[:ELITE]]
        sample = [n for config in elite for n in self.space.neighbours(config)]
        sample += [self.space.random(self.rng) for _ in range(POOL_SAMPLES)]
        unique = {config_key(config): config for config in sample}
        return [config for key, config in unique.items() if key not in self.seen]

    def _take(self, config: dict, batch: list[dict]) -> None:
        key = config_key(config)
        if key not in self.seen:
            self.seen.add(key)
            batch.append(config)
