"""The tuner's choice, with a stubbed measurer whose medians are known: the fastest finalist wins.

No kernel is compiled or timed here: ``Measurer`` is replaced by a stand-in that answers each
candidate with a median fixed in advance, once for the search and once for the re-timing of the
finalists, so the test knows which configuration the tuner must return. The stand-in answers both
ways the tuner may drive a measurer: ``measure`` (compile and time a batch in one call) and
``submit``/``collect``/``time_compiled`` (compiling one batch while the previous one is timed).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.timing import FINALISTS, TUNING
from sparsetir.tune import TuningDatabase, tune_spmm, tuner
from sparsetir.tune.measure import Measurement
from sparsetir.tune.space import config_key


class StubMeasurer:
    """Search: the i-th candidate measured takes ``2.0 - 0.1 i`` ms (later is faster), the fourth fails.

    Re-timing (the ``FINALISTS`` policy): the search's three fastest take 0.103, 0.071 and 0.090 ms
    in that order, the default 0.150 ms. The tuner must return the second-fastest of the search.
    """

    RETIMED_MS = (0.103, 0.071, 0.090)
    DEFAULT_RETIMED_MS = 0.150
    FAILING = 3  # the fourth candidate measured fails to compile
    RETIMING_FAILS = False  # True: every finalist fails when it is re-timed

    instances: list[StubMeasurer] = []

    def __init__(self, op, matrix, feat, dtype, target, *, workers, seed=0, **options):
        self.searched: list[Measurement] = []
        self.retimings: list[tuple[list[dict], object]] = []
        self.closed = False
        StubMeasurer.instances.append(self)

    def search_ranking(self) -> list[dict]:
        timed = [m for m in self.searched if m.median_s is not None]
        return [m.config for m in sorted(timed, key=lambda m: m.median_s)]

    def measure(self, configs, timing=TUNING, deadline=None):
        if timing is TUNING:
            results = []
            for config in configs:
                index = len(self.searched)
                if index == self.FAILING:
                    result = Measurement(config, error="compile failed: stub")
                else:
                    result = Measurement(config, median_s=(2.0 - 0.1 * index) * 1e-3)
                self.searched.append(result)
                results.append(result)
            return results
        self.retimings.append((list(configs), timing))
        if self.RETIMING_FAILS:
            return [Measurement(config, error="load failed: stub") for config in configs]
        ranking = [config_key(c) for c in self.search_ranking()]
        results = []
        for config in configs:
            place = ranking.index(config_key(config))
            ms = self.RETIMED_MS[place] if place < len(self.RETIMED_MS) else self.DEFAULT_RETIMED_MS
            results.append(Measurement(config, median_s=ms * 1e-3))
        return results

    def submit(self, configs):
        return list(configs)

    def collect(self, handle, deadline=None):
        return handle

    def time_compiled(self, configs, compiled=None, timing=TUNING):
        return self.measure(configs, timing)

    def abandon(self):
        pass

    def close(self):
        self.closed = True


@pytest.fixture
def stubbed(monkeypatch):
    StubMeasurer.instances.clear()
    monkeypatch.setattr(tuner, "Measurer", StubMeasurer)
    monkeypatch.setattr(StubMeasurer, "FAILING", StubMeasurer.FAILING)
    monkeypatch.setattr(StubMeasurer, "RETIMING_FAILS", False)
    return StubMeasurer.instances


@pytest.fixture
def matrix() -> sp.csr_matrix:
    A = sp.random(60, 50, density=0.1, format="csr", random_state=3, dtype=np.float32).tolil()
    A[7, :40] = 1.0  # one long row, so the space holds more than CSR
    return A.tocsr()


def test_the_tuner_returns_the_fastest_finalist_and_its_configuration(stubbed, matrix, tmp_path):
    database = TuningDatabase(tmp_path / "tune.jsonl")
    result = tune_spmm(matrix, 16, trials=8, budget_s=60, workers=1, batch=3, strategy="exhaustive",
                       database=database, progress=False)
    (measurer,) = stubbed
    assert len(measurer.searched) == result.trials == 8
    ranking = measurer.search_ranking()
    assert result.config == ranking[1], "the re-timing's fastest (0.071 ms), not the search's fastest"
    assert result.median_s == pytest.approx(0.071e-3)
    assert result.default_median_s == pytest.approx(StubMeasurer.DEFAULT_RETIMED_MS * 1e-3)
    assert result.speedup_over_default == pytest.approx(0.150 / 0.071)
    ((retimed, policy),) = measurer.retimings
    default = measurer.searched[0].config
    assert retimed == ranking[:3] + [default], "the three fastest and the default are re-timed together"
    assert policy is FINALISTS
    assert [f["median_s"] for f in result.finalists] == pytest.approx([0.103e-3, 0.071e-3, 0.090e-3, 0.150e-3])
    assert measurer.closed
    stored = database.lookup(result.key)
    assert stored["config"] == result.config and stored["median_s"] == pytest.approx(0.071e-3)
    assert stored["default_median_s"] == pytest.approx(0.150e-3) and stored["trials"] == 8


def test_the_search_best_is_the_fastest_of_what_it_measured(stubbed, matrix, tmp_path):
    """A failed candidate (no median) is skipped, and every measured candidate is recorded."""
    result = tune_spmm(matrix, 16, trials=5, budget_s=60, workers=1, batch=2, strategy="exhaustive",
                       database=TuningDatabase(tmp_path / "tune.jsonl"), progress=False)
    (measurer,) = stubbed
    assert [m["config"] for m in result.measurements] == [m.config for m in measurer.searched]
    assert [m["error"] for m in result.measurements].count("compile failed: stub") == 1
    finalists = [f["config"] for f in result.finalists]
    assert measurer.searched[StubMeasurer.FAILING].config not in finalists
    assert finalists[0] == measurer.searched[4].config, "the search's fastest (1.6 ms) leads the finalists"


def test_a_default_that_failed_is_not_retimed_and_has_no_median(stubbed, matrix, tmp_path, monkeypatch):
    monkeypatch.setattr(StubMeasurer, "FAILING", 0)  # the default is measured first, and fails
    result = tune_spmm(matrix, 16, trials=6, budget_s=60, workers=1, batch=3, strategy="exhaustive",
                       database=TuningDatabase(tmp_path / "tune.jsonl"), progress=False)
    (measurer,) = stubbed
    default = measurer.searched[0].config
    assert measurer.searched[0].error and result.default_median_s is None and result.speedup_over_default is None
    ((retimed, _),) = measurer.retimings
    assert retimed == measurer.search_ranking()[:3] and default not in retimed
    assert result.config == measurer.search_ranking()[1] and result.median_s == pytest.approx(0.071e-3)


def test_when_every_finalist_fails_again_the_search_best_is_kept(stubbed, matrix, tmp_path, monkeypatch):
    monkeypatch.setattr(StubMeasurer, "RETIMING_FAILS", True)
    result = tune_spmm(matrix, 16, trials=6, budget_s=60, workers=1, batch=3, strategy="exhaustive",
                       database=TuningDatabase(tmp_path / "tune.jsonl"), progress=False)
    (measurer,) = stubbed
    fastest = min((m for m in measurer.searched if m.median_s is not None), key=lambda m: m.median_s)
    assert result.config == fastest.config and result.median_s == pytest.approx(fastest.median_s)
    assert [f["config"] for f in result.finalists] == [fastest.config], "the search's best alone, no runner-up"
    assert result.default_median_s is None
