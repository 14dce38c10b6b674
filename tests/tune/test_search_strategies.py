"""The search strategies on a space whose candidates say where they came from.

In ``LabelledSpace`` the default is ``d``, the ordered candidates ``c0``, ``c1``, ..., a random draw is
``r<k>`` and a mutation of ``x`` is ``x>0``, ``x>1`` or ``x>2``, so each proposal shows whether it was
enumerated, drawn at random or mutated from one of the best candidates.
"""

from __future__ import annotations

import re

import pytest

from sparsetir.tune.search import ELITE, EXHAUSTIVE_MAX, Search


class LabelledSpace:
    def __init__(self, ordered: int = 6, drawn: int = 30):
        self.ordered = ["d"] + [f"c{i}" for i in range(ordered - 1)]
        self.drawn = [f"r{i}" for i in range(drawn)]
        self.draws = 0

    def default(self) -> dict:
        return {"format": "d"}

    def size(self) -> int:
        return len(self.ordered)

    def candidates(self):
        return ({"format": name} for name in self.ordered)

    def random(self, rng) -> dict:
        self.draws += 1
        return {"format": rng.choice(self.drawn)}

    def neighbours(self, config: dict) -> list[dict]:
        return [{"format": f"{config['format']}>{k}"} for k in range(3)]


def names(batch: list[dict]) -> list[str]:
    return [config["format"] for config in batch]


def proposals(search: Search, size: int) -> list[list[str]]:
    batches = []
    while batch := search.propose(size):
        batches.append(names(batch))
    return batches


# ---------------------------------------------------------------- exhaustive


def test_exhaustive_batches_are_full_default_first_and_never_repeat():
    batches = proposals(Search(LabelledSpace(ordered=12), "exhaustive"), 3)
    assert batches[0][0] == "d"
    assert all(len(batch) == 3 for batch in batches[:-1]) and 1 <= len(batches[-1]) <= 3
    proposed = [name for batch in batches for name in batch]
    assert len(set(proposed)) == len(proposed) and set(proposed) <= {"d"} | {f"c{i}" for i in range(11)}


def test_exhaustive_proposes_every_candidate_once():
    """A full batch stops before drawing the next candidate, so none is drawn and dropped."""
    batches = proposals(Search(LabelledSpace(ordered=12), "exhaustive"), 3)
    assert [name for batch in batches for name in batch] == ["d"] + [f"c{i}" for i in range(11)]


# ---------------------------------------------------------------- choosing a strategy


def test_auto_is_exhaustive_exactly_when_the_trials_cover_the_space():
    space = LabelledSpace(ordered=6)
    assert Search(space).strategy == "exhaustive"  # "auto" is the default; 6 <= EXHAUSTIVE_MAX
    assert Search(space, "auto", trials=6).strategy == "exhaustive"
    assert Search(space, "auto", trials=5).strategy == "evolutionary"
    assert Search(LabelledSpace(ordered=EXHAUSTIVE_MAX), "auto").strategy == "exhaustive"
    assert Search(LabelledSpace(ordered=EXHAUSTIVE_MAX + 1), "auto").strategy == "evolutionary"
    assert Search(LabelledSpace(ordered=EXHAUSTIVE_MAX + 1), "auto", trials=10_000).strategy == "exhaustive"


def test_an_unknown_strategy_is_refused():
    message = re.escape("strategy must be one of ('auto', 'exhaustive', 'random', 'evolutionary'), got 'greedy'")
    with pytest.raises(ValueError, match=f"^{message}$"):
        Search(LabelledSpace(), "greedy")


# ---------------------------------------------------------------- random


def test_random_draws_follow_the_seed():
    def first_batches(**seed):
        return [proposals_of(Search(LabelledSpace(), "random", **seed)) for _ in range(2)]

    def proposals_of(search):
        return [names(search.propose(4)) for _ in range(3)]

    same, again = first_batches(seed=3)
    assert same == again
    assert first_batches(seed=4)[0] != same
    assert first_batches()[0] == first_batches(seed=0)[0]


def test_random_never_mutates_even_when_told_medians():
    search = Search(LabelledSpace(), "random", seed=1)
    for median, config in enumerate(search.propose(6)):
        search.tell(config, float(median))
    assert not any(">" in name for name in names(search.propose(8)))


# ---------------------------------------------------------------- evolutionary


def told_six(search: Search) -> list[str]:
    """Propose and tell six candidates, the first the fastest; returns them, fastest first."""
    first = search.propose(6)
    for rank, config in enumerate(first):
        search.tell(config, 1.0 + rank)
    return names(first)


def test_evolutionary_mutates_the_best_four_and_explores_a_quarter():
    search = Search(LabelledSpace(), "evolutionary", seed=2)
    ranked = told_six(search)
    batch = names(search.propose(4))
    mutated = [name for name in batch if ">" in name]
    assert len(mutated) == 3 and len(batch) == 4, "4 - max(1, round(4 * 0.25)) = 3 mutations, 1 random draw"
    assert {name.split(">")[0] for name in mutated} <= set(ranked[:ELITE])


def test_evolutionary_takes_every_mutation_of_the_elite_before_drawing():
    search = Search(LabelledSpace(), "evolutionary", seed=2)
    ranked = told_six(search)
    batch = names(search.propose(40))  # wants 30 mutations; the elite has 4 x 3
    mutated = {name for name in batch if ">" in name}
    assert mutated == {f"{parent}>{k}" for parent in ranked[:ELITE] for k in range(3)}
    assert all(name.startswith("r") for name in batch if name not in mutated), "the rest are random draws"


def test_a_failed_candidate_is_not_a_parent():
    search = Search(LabelledSpace(), "evolutionary", seed=2)
    for config in search.propose(6):
        search.tell(config, None)
    assert not any(">" in name for name in names(search.propose(8)))


def test_a_space_with_nothing_new_gives_up_after_fifty_draws_a_slot():
    space = LabelledSpace(drawn=1)
    search = Search(space, "random")
    assert names(search.propose(2)) == ["d", "r0"]
    space.draws = 0
    assert search.propose(2) == []
    assert space.draws == 50 * 2
