"""The tuner's loop on a scripted problem: what it asks the measurer, when it stops, what it prints and records.

Nothing compiles or is timed here. The search space is a list of six formats (``f0``, the default,
to ``f5``) proposed in order, the measurer answers from a table (a median in ms, a candidate that
does not compile, or one that compiles but gives a wrong result), and the tuner's clock is
simulated: proposing a batch costs 0.25 s, waiting for its compile 3 s, timing it 12 s and
re-timing the finalists 2 s, so budgets, deadlines and the reported times are exact.

The measurer answers both ways the tuner drives one: ``measure`` (compile, then time: ``overlap=False``)
and ``submit``/``collect``/``time_compiled`` (the next batch compiles while this one is timed).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.backend import normalize_target
from sparsetir.formats import read_sparse_input
from sparsetir.runtime.loader import usable_cores
from sparsetir.timing import FINALISTS, TUNING
from sparsetir.tune import TuningDatabase, tune_spmm, tuner
from sparsetir.tune.database import tuning_key
from sparsetir.tune.fingerprint import fingerprint
from sparsetir.tune.measure import Compiled, Measurement

PROPOSE_S = 0.25
COLLECT_S = 3.0
TIMING_S = 12.0
RETIME_S = 2.0
MS = 1e-3


class ListSpace:
    """Six formats and no knobs; ``f0`` is the default."""

    def __init__(self, count: int = 6):
        self.formats = [f"f{i}" for i in range(count)]

    def default(self) -> dict:
        return {"format": self.formats[0]}

    def size(self) -> int:
        return len(self.formats)

    def candidates(self):
        return ({"format": name} for name in self.formats)


class Clock:
    """The tuner's ``time``: perf_counter and monotonic advance only when the fakes say so."""

    def __init__(self):
        self.elapsed = 0.0

    def perf_counter(self) -> float:
        return 1000.0 + self.elapsed

    def monotonic(self) -> float:
        return 5000.0 + self.elapsed


class Handle:
    def __init__(self, configs):
        self.configs = list(configs)


class ScriptedMeasurer:
    """Answers from ``medians`` (format -> ms; None: compiles, then gives a wrong result; missing: does
    not compile) and ``retimed`` (format -> ms on re-timing; missing: fails); ``cached`` formats come
    from the kernel cache (not built)."""

    medians: dict = {}
    retimed: dict = {}
    cached: set = set()
    timing_s = TIMING_S  # the seconds timing one batch of the search takes
    clock: Clock | None = None
    made: list[ScriptedMeasurer] = []

    def __init__(self, op, matrix, feats, dtype, target, *, workers, seed=0):
        self.args = {"op": op, "matrix": matrix, "feats": feats, "dtype": dtype, "target": target,
                     "workers": workers, "seed": seed}
        self.calls: list[tuple] = []
        self.outstanding: Handle | None = None
        self.closed = 0
        ScriptedMeasurer.made.append(self)

    def _compile(self, configs) -> list[Compiled]:
        self.clock.elapsed += COLLECT_S
        return [Compiled(0.5, None, c["format"] not in self.cached) if c["format"] in self.medians
                else Compiled(None, f"{c['format']} does not compile") for c in configs]

    def submit(self, configs):
        assert self.outstanding is None, "a batch submitted before the last one was collected"
        self.calls.append(("submit", names(configs)))
        self.outstanding = Handle(configs)
        return self.outstanding

    def collect(self, handle, deadline=None):
        assert handle is self.outstanding, "collected a batch that is not the outstanding one"
        self.outstanding = None
        self.calls.append(("collect", names(handle.configs), deadline))
        return self._compile(handle.configs)

    def time_compiled(self, configs, compiled=None, timing=TUNING):
        self.calls.append(("time", names(configs), timing, compiled is None))
        return self._time(configs, compiled, timing)

    def _time(self, configs, compiled, timing):
        self.clock.elapsed += self.timing_s if timing is TUNING else RETIME_S
        table = self.medians if timing is TUNING else self.retimed
        results = [Measurement(config) for config in configs]
        for result, answer in zip(results, compiled or ()):
            result.compile_s, result.error, result.built = answer.seconds, answer.error, answer.built
            result.compiled = answer.error is None
        for result in results:
            if result.error:
                continue
            ms = table.get(result.config["format"])
            if ms is None:
                result.error = f"{result.config['format']} gave a wrong result"
            else:
                result.median_s = ms * MS
        return results

    def measure(self, configs, timing=TUNING, deadline=None):
        self.calls.append(("measure", names(configs), deadline))
        return self._time(configs, self._compile(configs), timing)

    def abandon(self):
        self.calls.append(("abandon",))
        self.outstanding = None

    def close(self):
        self.closed += 1

    def of(self, kind: str) -> list[tuple]:
        return [call for call in self.calls if call[0] == kind]

    def batches(self) -> list[list[str]]:
        """The batches timed by the search (``measure`` or ``time_compiled`` with TUNING), in order."""
        return [call[1] for call in self.calls
                if call[0] == "measure" or (call[0] == "time" and call[2] is TUNING)]

    def retimings(self) -> list[list[str]]:
        return [call[1] for call in self.calls if call[0] == "time" and call[2] is FINALISTS]


class ScriptedSearch:
    """Proposes the space's candidates in order, each once, and records what the tuner tells it.

    It stands in for :class:`~sparsetir.tune.search.Search` (tested on its own in
    test_search_strategies.py), so these tests see the tuner's loop alone.
    """

    propose_s = PROPOSE_S  # the seconds proposing one batch takes
    clock: Clock | None = None
    made: list[ScriptedSearch] = []

    def __init__(self, space, strategy="auto", *, trials=None, seed=0, model=None):
        self.options = {"strategy": strategy, "trials": trials, "seed": seed, "model": model}
        self.space = space
        self.strategy = "exhaustive" if strategy == "auto" else strategy
        self.pending = list(space.candidates())
        self.told: list[tuple[dict, float | None]] = []
        self.sizes: list[int] = []
        self.ranked = 0
        ScriptedSearch.made.append(self)

    def propose(self, size: int) -> list[dict]:
        self.clock.elapsed += self.propose_s
        self.sizes.append(size)
        self.ranked += 1  # a count the result reports (``cost_model["ranked"]``)
        batch, self.pending = self.pending[:size], self.pending[size:]
        return batch

    def tell(self, config, median_s):
        self.told.append((config, median_s))


class ScriptedModel:
    """The cost model: what it was built from, and a summary that changes with each call."""

    made: list[ScriptedModel] = []
    records = 0

    def __init__(self, database, key):
        self.database, self.key, self.summaries = database, key, 0
        ScriptedModel.made.append(self)

    @classmethod
    def from_database(cls, database, key):
        return cls(database, key)

    def summary(self) -> dict:
        self.summaries += 1
        return {"records": self.records, "history_rows": 7, "summaries": self.summaries}


def names(configs) -> list[str]:
    return [config["format"] for config in configs]


@pytest.fixture
def scripted(monkeypatch):
    """Set the answers with ``scripted(medians, retimed, cached)``; returns the clock."""
    clock = Clock()
    ScriptedMeasurer.made, ScriptedSearch.made, ScriptedModel.made = [], [], []
    monkeypatch.setattr(ScriptedMeasurer, "clock", clock)
    monkeypatch.setattr(ScriptedSearch, "clock", clock)
    monkeypatch.setattr(ScriptedModel, "records", 0)
    monkeypatch.setattr(tuner, "Measurer", ScriptedMeasurer)
    monkeypatch.setattr(tuner, "Search", ScriptedSearch)
    monkeypatch.setattr(tuner, "CostModel", ScriptedModel)
    monkeypatch.setattr(tuner, "search_space", lambda op, matrix, device: ListSpace())
    monkeypatch.setattr(tuner, "time", clock)

    def script(medians: dict, retimed: dict | None = None, cached: set | None = None) -> Clock:
        monkeypatch.setattr(ScriptedMeasurer, "medians", medians)
        monkeypatch.setattr(ScriptedMeasurer, "retimed", retimed if retimed is not None else medians)
        monkeypatch.setattr(ScriptedMeasurer, "cached", cached or set())
        return clock

    return script


@pytest.fixture
def matrix() -> sp.csr_matrix:
    return sp.csr_matrix(np.array([[1, 0, 2, 0, 0], [0, 3, 0, 0, 0], [4, 0, 0, 5, 0]], dtype=np.float32))


@pytest.fixture
def db(tmp_path) -> TuningDatabase:
    return TuningDatabase(tmp_path / "tune.jsonl")


def only(made: list):
    assert len(made) == 1
    return made[0]


EVERY_FORMAT = {"f0": 2.0, "f1": 1.5, "f2": 1.8, "f3": 1.75, "f4": 2.5, "f5": 3.0}


# ---------------------------------------------------------------- the arguments checked first


@pytest.mark.parametrize(("options", "message"), [
    ({"budget_s": 0}, "budget_s must be a positive number of seconds, got 0"),
    ({"budget_s": -2.5}, "budget_s must be a positive number of seconds, got -2.5"),
    ({"budget_s": "30"}, "budget_s must be a positive number of seconds, got '30'"),
    ({"trials": 0}, "trials must be a positive int or None, got 0"),
    ({"trials": 2.0}, "trials must be a positive int or None, got 2.0"),
    ({"bound_s": 0}, "bound_s must be a positive number of seconds or None, got 0"),
    ({"bound_s": -1e-6}, "bound_s must be a positive number of seconds or None, got -1e-06"),
    ({"bound_s": True}, "bound_s must be a positive number of seconds or None, got True"),
    ({"bound_s": "1e-6"}, "bound_s must be a positive number of seconds or None, got '1e-6'"),
    ({"bound_s": float("nan")}, "bound_s must be a positive number of seconds or None, got nan"),
])
def test_bad_arguments_are_refused_before_anything_is_built(scripted, db, matrix, options, message):
    scripted(EVERY_FORMAT)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        tune_spmm(matrix, 8, workers=1, database=db, progress=False, **options)
    assert ScriptedMeasurer.made == [] and ScriptedSearch.made == []


def test_the_smallest_arguments_are_accepted(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, trials=1, budget_s=1, bound_s=1e-9, workers=1, database=db, progress=False)
    assert result.trials == 1 and result.config == {"format": "f0"} and result.bound_s == 1e-9


# ---------------------------------------------------------------- the problem handed to the measurer


def test_the_measurer_gets_the_canonical_matrix_the_dtype_and_the_seed(scripted, db):
    """Duplicates summed, rows sorted, values in the requested dtype, the empty last column kept."""
    scripted(EVERY_FORMAT)
    A = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3, 3])), shape=(2, 4))
    result = tuner.tune("spmm", A, 16, dtype="float32", trials=2, seed=3, workers=2, database=db, progress=False)
    args = only(ScriptedMeasurer.made).args
    assert (args["op"], args["feats"], args["dtype"], args["workers"], args["seed"]) == ("spmm", (16,), "float32", 2, 3)
    assert args["target"] == normalize_target("llvm")
    given = args["matrix"]
    assert given.shape == (2, 4) and given.dtype == np.float32 and given.has_canonical_format
    np.testing.assert_array_equal(given.toarray(), [[2.0, 0, 4.0, 0], [0, 0, 0, 0]])
    canonical = read_sparse_input(A, canonical=True)
    assert result.key == tuning_key("spmm", fingerprint(canonical), 16, "float32", normalize_target("llvm"))
    assert result.op == "spmm"


def test_without_a_dtype_the_matrix_keeps_its_own(scripted, db):
    scripted(EVERY_FORMAT)
    A = sp.eye(3, format="csr", dtype=np.float64)
    result = tuner.tune("spmm", A, 4, trials=1, workers=1, database=db, progress=False)
    args = only(ScriptedMeasurer.made).args
    assert args["dtype"] == "float64" and args["matrix"].dtype == np.float64 and args["seed"] == 0
    assert result.key["dtype"] == "float64" and args["target"] == normalize_target("llvm")


@pytest.mark.parametrize(("workers", "expected_workers", "batch"), [
    (None, usable_cores(), 2 * usable_cores()),
    (0, 1, 2),
    (1, 1, 2),
    (2.7, 2, 4),
    (3, 3, 6),
])
def test_workers_default_to_the_usable_cores_and_a_batch_to_twice_the_workers(scripted, db, matrix, workers,
                                                                               expected_workers, batch):
    scripted(EVERY_FORMAT)
    tune_spmm(matrix, 8, trials=20, workers=workers, database=db, progress=False)
    measurer = only(ScriptedMeasurer.made)
    assert measurer.args["workers"] == expected_workers
    assert only(ScriptedSearch.made).sizes[0] == batch


@pytest.mark.parametrize("overlap", [True, False])
def test_a_given_batch_size_is_kept(scripted, db, matrix, overlap):
    scripted(EVERY_FORMAT)
    tune_spmm(matrix, 8, batch=4, workers=1, overlap=overlap, database=db, progress=False)
    assert only(ScriptedSearch.made).sizes == [4, 4, 4]
    assert only(ScriptedMeasurer.made).batches() == [["f0", "f1", "f2", "f3"], ["f4", "f5"]]


def test_the_search_gets_the_strategy_the_trials_the_seed_and_the_cost_model(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, trials=4, batch=2, workers=1, strategy="evolutionary", seed=7, database=db,
                       progress=False)
    model = only(ScriptedModel.made)
    assert model.database is db and model.key == result.key
    assert only(ScriptedSearch.made).options == {"strategy": "evolutionary", "trials": 4, "seed": 7, "model": model}
    assert result.strategy == "evolutionary"
    assert result.cost_model == {"records": 0, "history_rows": 7, "summaries": 2, "ranked": 2}, \
        "the summary taken after the search, and how many candidates the model ranked"


def test_without_the_cost_model_the_search_gets_none(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, trials=4, batch=2, workers=1, cost_model=False, database=db, progress=False)
    assert ScriptedModel.made == [] and only(ScriptedSearch.made).options["model"] is None
    assert only(ScriptedSearch.made).options == {"strategy": "auto", "trials": 4, "seed": 0, "model": None}
    assert result.cost_model == {"ranked": 2} and result.strategy == "exhaustive"


def test_a_database_given_by_path_is_used(scripted, tmp_path, matrix):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, trials=2, workers=1, database=str(tmp_path / "by-path.jsonl"), progress=False)
    assert TuningDatabase(tmp_path / "by-path.jsonl").lookup(result.key)["config"] == result.config
    assert only(ScriptedModel.made).database.path == tmp_path / "by-path.jsonl"


# ---------------------------------------------------------------- the pipeline: what is submitted, collected, timed


def test_the_next_batch_compiles_while_the_current_one_is_timed(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, batch=2, budget_s=1000, workers=1, database=db, progress=False)
    measurer = only(ScriptedMeasurer.made)
    kinds = [call[0] for call in measurer.calls]
    assert kinds == ["submit", "collect", "submit", "time", "collect", "submit", "time", "collect", "time", "time"]
    assert [call[1] for call in measurer.of("submit")] == [["f0", "f1"], ["f2", "f3"], ["f4", "f5"]]
    assert [call[1] for call in measurer.of("collect")] == [["f0", "f1"], ["f2", "f3"], ["f4", "f5"]]
    assert measurer.batches() == [["f0", "f1"], ["f2", "f3"], ["f4", "f5"]]
    assert [call[3] for call in measurer.of("time")] == [False, False, False, True], \
        "the search's batches are timed with the workers' answers, the finalists from the kernel cache"
    assert measurer.of("abandon") == [] and measurer.closed == 1
    assert result.overlap is True and only(ScriptedSearch.made).sizes == [2, 2, 2, 2]


def test_without_overlap_each_batch_is_compiled_and_timed_before_the_next_is_proposed(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, batch=2, budget_s=1000, workers=1, overlap=False, database=db, progress=False)
    measurer = only(ScriptedMeasurer.made)
    assert [call[0] for call in measurer.calls] == ["measure", "measure", "measure", "time"]
    assert measurer.batches() == [["f0", "f1"], ["f2", "f3"], ["f4", "f5"]]
    assert measurer.of("submit") == [] and measurer.of("abandon") == [] and measurer.closed == 1
    assert result.overlap is False


@pytest.mark.parametrize("budget_s", [1000, 40])
def test_overlap_on_or_off_picks_the_same_configuration(scripted, tmp_path, matrix, budget_s):
    scripted(EVERY_FORMAT | {"f2": None}, {"f1": 1.6, "f3": 1.4, "f4": 1.5, "f0": 2.2})
    results = [tune_spmm(matrix, 8, batch=1, budget_s=budget_s, workers=1, overlap=overlap, progress=False,
                         database=TuningDatabase(tmp_path / f"{overlap}.jsonl")) for overlap in (True, False)]
    on, off = results
    assert on.config == off.config
    assert on.measurements == off.measurements
    assert (on.median_s, on.default_median_s) == (off.median_s, off.default_median_s)
    if budget_s == 1000:
        assert on.config == {"format": "f3"} and on.trials == 6
    else:
        assert on.config == {"format": "f1"} and on.trials == 3


# ---------------------------------------------------------------- when the search stops


@pytest.mark.parametrize("overlap", [True, False])
def test_trials_bound_the_search_exactly(scripted, db, matrix, overlap):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, trials=5, batch=2, budget_s=1000, workers=1, strategy="exhaustive",
                       overlap=overlap, database=db, progress=False)
    assert only(ScriptedSearch.made).sizes == [2, 2, 1]
    assert only(ScriptedMeasurer.made).batches() == [["f0", "f1"], ["f2", "f3"], ["f4"]]
    assert result.trials == 5 and len(result.measurements) == 5
    assert only(ScriptedMeasurer.made).of("abandon") == []


def test_one_trial_is_one_batch_of_one(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, trials=1, budget_s=1000, workers=4, database=db, progress=False)
    assert only(ScriptedSearch.made).sizes == [1]
    assert only(ScriptedMeasurer.made).batches() == [["f0"]] and result.trials == 1


def test_without_trials_the_search_ends_when_the_space_is_exhausted(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, batch=4, budget_s=1000, workers=1, strategy="exhaustive", database=db,
                       progress=False)
    assert only(ScriptedMeasurer.made).batches() == [["f0", "f1", "f2", "f3"], ["f4", "f5"]]
    assert result.trials == 6 and result.config == {"format": "f1"}


def test_the_budget_ends_the_search_and_drops_the_batch_still_compiling(scripted, db, matrix, capsys):
    """A 40 s budget: the search may start batches until 36 s. Batch 3 is timed from 34 s to 46 s while
    batch 4 compiles: batch 4 is abandoned, and the finalists are re-timed (46 s to 48 s)."""
    clock = scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, batch=1, budget_s=40, workers=1, strategy="exhaustive", database=db)
    measurer = only(ScriptedMeasurer.made)
    assert [call[1] for call in measurer.of("submit")] == [["f0"], ["f1"], ["f2"], ["f3"]]
    assert measurer.batches() == [["f0"], ["f1"], ["f2"]]
    assert measurer.calls[-3:] == [("time", ["f2"], TUNING, False), ("abandon",), ("time", ["f1", "f2", "f0"],
                                                                                   FINALISTS, True)]
    deadlines = [call[2] for call in measurer.of("collect")]
    assert deadlines == pytest.approx([5000.25 + tuner.FIRST_COMPILE_S, 5015.5 + 20.5, 5030.75 + tuner.MIN_COMPILE_S])
    assert result.tune_s == clock.elapsed == 48.0 and result.trials == 3
    lines = capsys.readouterr().err.splitlines()
    assert lines[-4:] == [
        "[tune spmm] 1 candidates in 15.5 s; best 2.000 ms {'format': 'f0'}",
        "[tune spmm] 2 candidates in 30.8 s; best 1.500 ms {'format': 'f1'}",
        "[tune spmm] 3 candidates in 46.0 s; best 1.500 ms {'format': 'f1'}",
        "[tune spmm] done in 48.0 s: 3 compiled (3 built, 0 from the kernel cache), 3 measured; default 2.000 ms, "
        "best 1.500 ms (1.33x) with {'format': 'f1'}; 1 still compiling at the end were dropped",
    ]
    assert db.lookup(result.key)["tune_s"] == 48.0 and db.lookup(result.key)["trials"] == 3


def test_without_overlap_the_budget_ends_the_search_with_nothing_to_drop(scripted, db, matrix, capsys):
    """Each batch: 0.25 s to propose, 15 s to compile and time. Starts at 0, 15.25 and 30.5 s of a 36 s search."""
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, batch=1, budget_s=40, workers=1, overlap=False, database=db)
    measurer = only(ScriptedMeasurer.made)
    assert measurer.batches() == [["f0"], ["f1"], ["f2"]] and measurer.of("abandon") == []
    deadlines = [call[2] for call in measurer.of("measure")]
    assert deadlines == pytest.approx([5000.25 + tuner.FIRST_COMPILE_S, 5015.5 + 20.5, 5030.75 + 10])
    assert result.tune_s == 47.75
    err = capsys.readouterr().err
    assert err.splitlines()[-1].endswith("best 1.500 ms (1.33x) with {'format': 'f1'}") and "dropped" not in err


def test_a_batch_starts_only_before_the_search_budget_is_spent(scripted, db, matrix):
    """A 17 s budget: the search ends at 15.3 s; batch 2 was submitted at 3.25 s, so it is timed, not dropped,
    and no third batch is proposed."""
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, batch=1, budget_s=17, workers=1, database=db, progress=False)
    measurer = only(ScriptedMeasurer.made)
    assert measurer.batches() == [["f0"]] and [call[1] for call in measurer.of("submit")] == [["f0"], ["f1"]]
    assert measurer.of("abandon") == [("abandon",)] and result.trials == 1


def test_until_a_candidate_runs_each_compile_gets_the_first_compile_floor(scripted, db, matrix):
    scripted({"f2": 1.0, "f3": 1.5, "f1": None})
    tune_spmm(matrix, 8, batch=1, budget_s=70, workers=1, database=db, progress=False)
    deadlines = [call[2] for call in only(ScriptedMeasurer.made).of("collect")]
    first = tuner.FIRST_COMPILE_S
    assert deadlines[:4] == pytest.approx([5000.25 + first, 5015.5 + first, 5030.75 + first, 5046.0 + 17])


def test_the_search_budget_is_the_budget_less_the_finalists_share(scripted, db, matrix):
    """An 80 s budget leaves 72 s to the search: the fifth batch is timed from 64.5 s to 76.5 s, and the sixth,
    compiling meanwhile, is dropped."""
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, batch=1, budget_s=80, workers=1, database=db, progress=False)
    measurer = only(ScriptedMeasurer.made)
    assert measurer.batches() == [["f0"], ["f1"], ["f2"], ["f3"], ["f4"]]
    assert measurer.of("abandon") == [("abandon",)] and result.trials == 5


def test_a_batch_that_ends_exactly_at_the_end_of_the_search_budget_ends_the_search(scripted, db, matrix,
                                                                                   monkeypatch):
    """A 10 s budget leaves 9 s to the search; the first batch is timed from 3.5 s to 9 s exactly."""
    scripted(EVERY_FORMAT)
    monkeypatch.setattr(ScriptedMeasurer, "timing_s", 5.5)
    result = tune_spmm(matrix, 8, batch=1, budget_s=10, workers=1, database=db, progress=False)
    measurer = only(ScriptedMeasurer.made)
    assert measurer.batches() == [["f0"]] and measurer.of("abandon") == [("abandon",)] and result.trials == 1


def test_no_batch_is_proposed_exactly_at_the_end_of_the_search_budget(scripted, db, matrix, monkeypatch):
    """A 10 s budget leaves 9 s to the search; the second batch's compile is collected at 9 s exactly (3.25 s,
    0.25 s to propose, 2.5 s to time, 3 s to collect): no third batch is proposed, and nothing is dropped."""
    scripted(EVERY_FORMAT)
    monkeypatch.setattr(ScriptedMeasurer, "timing_s", 2.5)
    result = tune_spmm(matrix, 8, batch=1, budget_s=10, workers=1, database=db, progress=False)
    measurer = only(ScriptedMeasurer.made)
    assert [call[1] for call in measurer.of("submit")] == [["f0"], ["f1"]]
    assert measurer.batches() == [["f0"], ["f1"]] and measurer.of("abandon") == [] and result.trials == 2


# ---------------------------------------------------------------- what is measured, counted and picked


def test_failures_are_skipped_and_counted_and_the_counts_reported(scripted, db, matrix, capsys):
    """f1 and f5 do not compile, f2 compiles but gives a wrong result, f3 comes from the kernel cache."""
    scripted({"f0": 2.0, "f2": None, "f3": 1.0, "f4": 1.5}, {"f0": 2.0, "f3": 0.5, "f4": 1.0}, cached={"f3"})
    result = tune_spmm(matrix, 8, batch=3, budget_s=1000, workers=1, bound_s=0.25 * MS, database=db)
    assert (result.compiled, result.kernels_built, result.measured, result.trials) == (4, 3, 3, 6)
    assert [m["error"] for m in result.measurements] == [
        None, "f1 does not compile", "f2 gave a wrong result", None, None, "f5 does not compile"]
    assert [m["compiled"] for m in result.measurements] == [True, False, True, True, True, False]
    assert [m["built"] for m in result.measurements] == [True, None, True, False, True, None]
    search = only(ScriptedSearch.made)
    assert search.told == [({"format": "f0"}, 2.0 * MS), ({"format": "f1"}, None), ({"format": "f2"}, None),
                           ({"format": "f3"}, 1.0 * MS), ({"format": "f4"}, 1.5 * MS), ({"format": "f5"}, None)]
    assert only(ScriptedMeasurer.made).retimings() == [["f3", "f4", "f0"]]
    assert result.config == {"format": "f3"} and result.median_s == 0.5 * MS and result.default_median_s == 2.0 * MS
    assert result.report() == ("4 compiled (3 built, 1 from the kernel cache), 3 measured; default 2.000 ms, "
                               "best 0.500 ms (4.00x), bound 0.250 ms (best at 50% of it)")
    assert capsys.readouterr().err.splitlines()[-1] == f"[tune spmm] done in 32.8 s: {result.report()} with " \
        "{'format': 'f3'}"
    stored = db.lookup(result.key)
    assert (stored["compiled"], stored["kernels_built"], stored["measured"]) == (4, 3, 3)


def test_the_counts_are_the_same_without_overlap(scripted, db, matrix):
    scripted({"f0": 2.0, "f2": None, "f3": 1.0, "f4": 1.5}, cached={"f3", "f1"})
    result = tune_spmm(matrix, 8, batch=4, budget_s=1000, workers=1, overlap=False, database=db, progress=False)
    assert (result.compiled, result.kernels_built, result.measured, result.trials) == (4, 3, 3, 6)


def test_the_best_so_far_is_the_fastest_and_a_tie_keeps_the_first(scripted, db, matrix, capsys):
    scripted(EVERY_FORMAT | {"f3": 1.8, "f4": 1.0}, {"f4": 1.1, "f2": 1.2, "f3": 1.3, "f0": 2.2})
    result = tune_spmm(matrix, 8, batch=2, budget_s=1000, workers=1, database=db)
    progress = [line for line in capsys.readouterr().err.splitlines() if " candidates in " in line]
    assert [line.split("; best ")[1] for line in progress] == [
        "1.500 ms {'format': 'f1'}", "1.500 ms {'format': 'f1'}", "1.000 ms {'format': 'f4'}"]
    assert only(ScriptedMeasurer.made).retimings() == [["f4", "f1", "f2", "f0"]], "f2 and f3 tie at 1.8 ms: the first measured is the finalist"
    assert result.config == {"format": "f4"} and result.median_s == 1.1 * MS


def test_a_tie_for_the_best_so_far_keeps_the_first(scripted, db, matrix, capsys):
    scripted({"f0": 2.0, "f1": 1.5, "f2": 1.5}, {"f0": 2.0, "f1": 1.0, "f2": 1.0})
    tune_spmm(matrix, 8, batch=1, budget_s=1000, workers=1, database=db)
    progress = [line for line in capsys.readouterr().err.splitlines() if " candidates in " in line]
    assert progress[1].endswith("best 1.500 ms {'format': 'f1'}")
    assert progress[2].endswith("best 1.500 ms {'format': 'f1'}"), "f2 ties f1: f1 stays"


def test_the_default_is_measured_first_and_reported(scripted, db, matrix):
    scripted(EVERY_FORMAT, {"f1": 1.0, "f3": 1.2, "f2": 1.1, "f0": 3.0})
    result = tune_spmm(matrix, 8, trials=6, batch=6, workers=1, database=db, progress=False)
    assert only(ScriptedMeasurer.made).batches()[0][0] == "f0"
    assert only(ScriptedMeasurer.made).retimings() == [["f1", "f3", "f2", "f0"]]
    assert result.default_median_s == 3.0 * MS and result.speedup_over_default == pytest.approx(3.0)
    assert [f["config"]["format"] for f in result.finalists] == ["f1", "f3", "f2", "f0"]


def test_when_nothing_runs_the_error_names_each_failure_once(scripted, db, matrix):
    scripted({"f1": None, "f2": None})
    message = "no candidate compiled and ran correctly: f0 does not compile; f1 gave a wrong result; " \
              "f2 gave a wrong result; f3 does not compile"
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        tune_spmm(matrix, 8, trials=4, batch=2, workers=1, database=db, progress=False)
    measurer = only(ScriptedMeasurer.made)
    assert measurer.closed == 1 and measurer.retimings() == []
    assert db.records() == [], "nothing is recorded"


def test_a_long_list_of_failures_is_cut_at_800_characters(scripted, db, matrix, monkeypatch):
    scripted({})

    def failing(self, configs, compiled=None, timing=TUNING):
        self.clock.elapsed += TIMING_S
        return [Measurement(config, error=f"{config['format']} " + "x" * 300) for config in configs]

    monkeypatch.setattr(ScriptedMeasurer, "time_compiled", failing)
    with pytest.raises(RuntimeError) as error:
        tune_spmm(matrix, 8, trials=6, batch=6, workers=1, database=db, progress=False)
    assert str(error.value) == "no candidate compiled and ran correctly: " + "; ".join(
        f"f{i} " + "x" * 300 for i in range(6))[:800]


def test_the_measurer_is_closed_when_the_search_fails(scripted, db, matrix, monkeypatch):
    scripted(EVERY_FORMAT)

    def broken(self, handle, deadline=None):
        raise OSError("worker pipe closed")

    monkeypatch.setattr(ScriptedMeasurer, "collect", broken)
    with pytest.raises(OSError, match="worker pipe closed"):
        tune_spmm(matrix, 8, trials=2, workers=1, database=db, progress=False)
    assert only(ScriptedMeasurer.made).closed == 1


# ---------------------------------------------------------------- what is printed and recorded


def test_progress_goes_to_stderr_line_by_line(scripted, db, matrix, capsys):
    scripted(EVERY_FORMAT | {"f1": None}, {"f2": 0.090, "f3": 0.071, "f0": 0.150})
    result = tuner.tune("spmm", matrix, 16, trials=5, batch=2, budget_s=100, workers=1, strategy="exhaustive",
                        database=db)
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "[tune spmm] 3x5 nnz 5 feat 16: 6 candidates (6 formats), exhaustive, budget 100 s / 5 trials; "
        "overlapped compiles",
        "[tune spmm] 2 candidates in 15.5 s; best 2.000 ms {'format': 'f0'}",
        "[tune spmm] 4 candidates in 30.8 s; best 1.750 ms {'format': 'f3'}",
        "[tune spmm] 5 candidates in 45.8 s; best 1.750 ms {'format': 'f3'}",
        "[tune spmm] done in 47.8 s: 5 compiled (5 built, 0 from the kernel cache), 4 measured; default 0.150 ms, "
        "best 0.071 ms (2.11x) with {'format': 'f3'}",
    ]
    assert result.config == {"format": "f3"}


def test_progress_before_anything_ran_without_trials_and_with_a_cost_model(scripted, db, matrix, capsys,
                                                                           monkeypatch):
    scripted({"f2": 1.0})
    monkeypatch.setattr(ScriptedModel, "records", 3)
    tune_spmm(matrix, 8, batch=2, budget_s=30.5, workers=1, overlap=False, database=db)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == ("[tune spmm] 3x5 nnz 5 feat 8: 6 candidates (6 formats), exhaustive, budget 30.5 s; "
                        "cost model from 7 measurements of 3 records")
    assert lines[1] == "[tune spmm] 2 candidates in 15.2 s; best none yet"
    assert lines[-1] == ("[tune spmm] done in 32.5 s: 1 compiled (1 built, 0 from the kernel cache), 1 measured; "
                         "default n/a, best 1.000 ms with {'format': 'f2'}")


def test_progress_is_silent_when_off(scripted, db, matrix, capsys):
    scripted(EVERY_FORMAT)
    tune_spmm(matrix, 8, batch=1, budget_s=40, workers=1, database=db, progress=False)
    assert capsys.readouterr() == ("", "")


def test_the_tuned_result_is_recorded_in_full_and_read_back(scripted, db, matrix):
    scripted(EVERY_FORMAT, {"f1": 1.0, "f2": 1.25, "f3": 1.125, "f0": 2.0}, cached={"f4"})
    result = tune_spmm(matrix, 8, trials=6, batch=6, workers=1, strategy="exhaustive", database=db,
                       progress=False)
    assert (result.tune_s, result.strategy, result.op, result.trials) == (17.25, "exhaustive", "spmm", 6)
    assert not result.from_database
    (stored,) = db.records()
    assert stored["key"] == result.key and stored["source"] == "tuned" and stored["config"] == {"format": "f1"}
    assert stored["median_s"] == 1.0 * MS and stored["default_median_s"] == 2.0 * MS
    assert stored["tune_s"] == 17.25 and stored["trials"] == 6 and stored["strategy"] == "exhaustive"
    assert stored["measurements"] == result.measurements and len(stored["measurements"]) == 6
    assert stored["finalists"] == result.finalists and len(result.finalists) == 4
    assert (stored["compiled"], stored["kernels_built"], stored["measured"]) == (6, 5, 6)
    hit = tune_spmm(matrix, 8, trials=6, workers=1, bound_s=2e-3, database=db, progress=False)
    assert hit.from_database and len(ScriptedMeasurer.made) == 1, "the second call measures nothing"
    assert (hit.config, hit.median_s, hit.default_median_s) == (result.config, result.median_s,
                                                               result.default_median_s)
    assert (hit.compiled, hit.kernels_built, hit.measured, hit.trials) == (6, 5, 6, 6)
    assert (hit.tune_s, hit.strategy, hit.finalists, hit.measurements) == (17.25, "exhaustive", result.finalists,
                                                                         result.measurements)
    assert hit.bound_s == 2e-3 and hit.fraction_of_bound == 2.0


def test_use_database_false_tunes_even_on_a_hit(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    first = tune_spmm(matrix, 8, trials=2, workers=1, database=db, progress=False)
    second = tune_spmm(matrix, 8, trials=2, workers=1, database=db, use_database=False, progress=False)
    assert not second.from_database and len(ScriptedMeasurer.made) == 2
    assert [r["source"] for r in db.records()] == ["tuned", "tuned"] and second.key == first.key


def test_a_stored_record_counts_only_what_are_whole_numbers(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    key = tuner.problem("spmm", matrix, 8, "llvm", None)[-1]
    db.add(key, {"format": "f2"}, median_s=1e-3, source="bundle", compiled=True, kernels_built="3", measured=4.0)
    hit = tune_spmm(matrix, 8, workers=1, database=db, progress=False)
    assert (hit.compiled, hit.kernels_built, hit.measured) == (0, 0, 0) and hit.bound_s is None
    db.add(key, {"format": "f2"}, median_s=1e-3, source="bundle", compiled=5, kernels_built=2, measured=4)
    hit = tune_spmm(matrix, 8, workers=1, database=db, progress=False)
    assert (hit.compiled, hit.kernels_built, hit.measured) == (5, 2, 4)
    assert ScriptedMeasurer.made == []


def test_the_phases_are_timed(scripted, db, matrix):
    """Three batches of two: 0.25 s each to propose (four proposals: the last finds nothing), 3 s each to
    collect, 12 s each to time; 2 s to re-time the finalists."""
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, batch=2, budget_s=1000, workers=1, database=db, progress=False)
    assert result.phases_s == {"propose_s": 1.0, "compile_wait_s": 9.0, "measure_s": 36.0, "finalists_s": 2.0}
    assert result.tune_s == 48.0


def test_the_phases_are_rounded_to_the_millisecond(scripted, db, matrix, monkeypatch):
    """Four proposals of 1/64 s: 0.0625 s, reported as 0.062 s (round half to even)."""
    scripted(EVERY_FORMAT)
    monkeypatch.setattr(ScriptedSearch, "propose_s", 1 / 64)
    result = tune_spmm(matrix, 8, batch=2, budget_s=1000, workers=1, database=db, progress=False)
    assert result.phases_s == {"propose_s": 0.062, "compile_wait_s": 9.0, "measure_s": 36.0, "finalists_s": 2.0}
    assert isinstance(result.phases_s["propose_s"], float)


def test_the_phases_without_overlap(scripted, db, matrix):
    scripted(EVERY_FORMAT)
    result = tune_spmm(matrix, 8, batch=2, budget_s=1000, workers=1, overlap=False, database=db, progress=False)
    assert result.phases_s == {"propose_s": 1.0, "compile_wait_s": 0.0, "measure_s": 45.0, "finalists_s": 2.0}


def test_an_op_with_two_feature_sizes_keys_and_reports_both(scripted, db, capsys):
    """rgms: the key's feat is the list of both sizes, and the progress line shows them as 8x4."""
    scripted(EVERY_FORMAT)
    matrices = [sp.random(6, 6, density=0.3, format="csr", dtype=np.float32, random_state=r) for r in range(2)]
    key = tuner.problem("rgms", matrices, (8, 4), "llvm", None)[-1]
    assert key == tuning_key("rgms", key["fingerprint"], [8, 4], "float32", normalize_target("llvm"))
    assert key["feat"] == [8, 4] and key["fingerprint"]["relations"] == 2
    result = tuner.tune("rgms", matrices, (8, 4), trials=2, workers=1, database=db)
    assert result.key == key and only(ScriptedMeasurer.made).args["feats"] == (8, 4)
    assert db.lookup(key)["config"] == result.config
    assert re.fullmatch(r"\[tune rgms\] 6x6 nnz \d+ feat 8x4: 6 candidates .*", capsys.readouterr().err.splitlines()[0])


def test_a_tune_result_in_full():
    result = tuner.TuneResult("spmm", {"format": "csr"}, 2e-3, 3e-3, {"op": "spmm"}, [{"m": 1}], 2.5, 4, "random",
                              finalists=[{"f": 1}], compiled=4, kernels_built=1, measured=3, bound_s=1e-3,
                              overlap=True, cost_model={"records": 2}, phases_s={"measure_s": 1.0})
    assert result.to_dict() == {
        "op": "spmm", "config": {"format": "csr"}, "median_s": 2e-3, "default_median_s": 3e-3,
        "key_hash": tuner.key_hash({"op": "spmm"}), "key": {"op": "spmm"}, "tune_s": 2.5, "trials": 4,
        "strategy": "random", "from_database": False, "compiled": 4, "kernels_built": 1, "measured": 3,
        "bound_s": 1e-3, "speedup_over_default": pytest.approx(1.5), "fraction_of_bound": 0.5, "overlap": True,
        "cost_model": {"records": 2}, "phases_s": {"measure_s": 1.0}, "finalists": [{"f": 1}],
        "measurements": [{"m": 1}]}
    assert result.report() == ("4 compiled (1 built, 3 from the kernel cache), 3 measured; default 3.000 ms, "
                               "best 2.000 ms (1.50x), bound 1.000 ms (best at 50% of it)")
    empty = tuner.TuneResult("spmm", {}, None, None, {})
    assert empty.fraction_of_bound is None and empty.speedup_over_default is None
    assert empty.report() == "0 compiled (0 built, 0 from the kernel cache), 0 measured; default n/a, best n/a"
    assert tuner.TuneResult("spmm", {}, None, None, {}, bound_s=1e-3).fraction_of_bound is None
    assert (empty.measurements, empty.tune_s, empty.trials, empty.strategy, empty.from_database, empty.finalists,
            empty.overlap, empty.cost_model, empty.phases_s) == ([], 0.0, 0, "", False, [], False, {}, {})
