"""The cost model: it ranks what training showed fastest first, changes nothing without data, and
skips damaged database records."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.formats import read_sparse_input
from sparsetir.tune import TuningDatabase
from sparsetir.tune.cost_model import MIN_ROWS, CostModel, case_features, config_features
from sparsetir.tune.database import key_hash, tuning_key
from sparsetir.tune.fingerprint import fingerprint
from sparsetir.tune.search import Search
from sparsetir.tune.space import search_space

TARGET = {"kind": "llvm"}


def _case(seed: int, rows: int = 400, density: float = 0.02):
    matrix = read_sparse_input(sp.random(rows, rows, density=density, format="csr", random_state=seed,
                                         dtype=np.float32), canonical=True)
    return matrix, tuning_key("spmm", fingerprint(matrix), 32, "float32", TARGET)


@pytest.fixture
def space():
    return search_space("spmm", _case(0)[0], "cpu")


def _fastest(space) -> dict:
    """A configuration that is not the default, with the best factor of each dimension of the synthetic law."""
    return {**space.default(), "format": space.formats[-1], "unroll": 4, "prefetch": 8}


LAW = (("format", 1.6), ("unroll", 1.3), ("prefetch", 1.25), ("vector_width", 1.1))


def _law(config: dict) -> dict:
    """The dimensions the synthetic law depends on (the others tie)."""
    return {name: config.get(name) for name, _ in LAW}


def _synthetic_seconds(config: dict, fastest: dict, scale: float) -> float:
    """A law with one optimum: each dimension that differs from ``fastest`` costs a factor."""
    factor = 1.0
    for name, penalty in LAW:
        if config.get(name) != fastest.get(name):
            factor *= penalty
    return scale * factor


def _records(space, fastest: dict, cases=(1, 2, 3), per_case: int = 30) -> list[dict]:
    rng = np.random.default_rng(0)
    pick = random.Random(5)
    records = []
    for seed in cases:
        _, key = _case(seed, rows=300 + 100 * seed)
        configs = [space.default(), fastest] + [space.random(pick) for _ in range(per_case - 2)]
        measurements = [{"config": c, "median_s": _synthetic_seconds(c, fastest, 1e-3 * seed)
                         * float(rng.uniform(0.97, 1.03)), "compile_s": 1.0, "error": None} for c in configs]
        records.append({"key_hash": key_hash(key), "key": key, "config": fastest, "median_s": 1e-3,
                        "source": "tuned", "measurements": measurements})
    return records


def test_the_configuration_fastest_in_training_is_proposed_first(space):
    fastest = _fastest(space)
    _, key = _case(0)
    model = CostModel(key, _records(space, fastest))
    assert model.records == 3 and model.skipped == 0 and model.update()
    search = Search(space, "evolutionary", seed=1, model=model)
    batch = search.propose(4)
    assert batch[0] == space.default()  # the default is always measured
    assert _law(batch[1]) == _law(fastest)  # then the best predicted (the knobs the law ignores tie)
    assert search.ranked == 2  # a quarter of the batch is left to the strategy's exploration
    candidates = list(space.candidates())
    predicted = model.predict(candidates)
    assert _law(candidates[int(np.argmin(predicted))]) == _law(fastest)
    # the predicted order follows the law: the best is predicted faster than the default by about the law's factor
    default, best = model.predict([space.default(), fastest])
    assert default - best == pytest.approx(math.log(1.6 * 1.3 * 1.25), abs=0.25)


def test_without_training_data_the_search_is_unchanged(space):
    _, key = _case(0)
    plain, ranked = Search(space, "evolutionary", seed=3), Search(space, "evolutionary", seed=3,
                                                                  model=CostModel(key, []))
    rng = np.random.default_rng(0)
    measured = 0
    while measured + 4 < MIN_ROWS:  # fewer measurements than a model needs: the same proposals
        first, second = plain.propose(4), ranked.propose(4)
        assert first == second and not ranked.model.trained
        for config in first:
            median = float(rng.uniform(1e-3, 2e-3))
            plain.tell(config, median)
            ranked.tell(config, median)
        measured += len(first)
    assert ranked.ranked == 0


def test_the_run_itself_trains_the_model_once_it_has_enough(space):
    _, key = _case(0)
    fastest = _fastest(space)
    model = CostModel(key, [])
    search = Search(space, "random", seed=4, model=model)
    for config in [fastest, *(space.random(search.rng) for _ in range(MIN_ROWS))]:
        search.tell(config, _synthetic_seconds(config, fastest, 1e-3))
    assert model.update() and model.summary()["current_rows"] == MIN_ROWS + 1
    assert search.propose(4)[0] != fastest  # measured already: never proposed again


DAMAGED = [
    "a string, not a record",
    {"key_hash": "x", "config": {"format": "csr"}},  # no key
    {"key_hash": "x", "key": "spmm", "config": {"format": "csr"}},
    {"key_hash": "x", "key": {"op": "spmm", "target": TARGET}, "config": {"format": "csr"}},  # no fingerprint
    {"key_hash": "x", "key": {"op": "spmm", "target": TARGET, "fingerprint": {"shape": [3], "nnz": 1,
                                                                                 "degree_histogram": []},
                              "feat": 8, "dtype": "float32"}, "config": {"format": "csr"}},
]


def _damaged_measurements(good: dict) -> list[dict]:
    broken = []
    for measurements in ("not a list", ["not an object", {}],
                         [{"config": {"format": "csr"}, "median_s": "fast"}, {"config": {"format": "csr"},
                                                                               "median_s": 1.0}],
                         [{"config": {"format": "csr"}, "median_s": -1.0}, {"config": {"format": "csr"},
                                                                            "median_s": 1.0}],
                         [{"config": {"format": "csr"}, "median_s": math.nan}, {"config": {"format": "csr"},
                                                                                "median_s": 1.0}],
                         [{"config": {"unroll": 4}, "median_s": 1.0}, {"config": {"format": "csr"}, "median_s": 2.0}],
                         [{"config": {"format": "nosuchformat:3"}, "median_s": 1.0},
                          {"config": {"format": "csr"}, "median_s": 2.0}],
                         [{"config": {"format": "csr", "unroll": {"a": 1}}, "median_s": 1.0},
                          {"config": {"format": "csr"}, "median_s": 2.0}]):
        broken.append({**good, "measurements": measurements})
    return broken


def test_damaged_records_are_skipped_and_the_rest_is_learnt(space, tmp_path):
    fastest = _fastest(space)
    good = _records(space, fastest)
    broken = DAMAGED + _damaged_measurements(good[0])
    _, key = _case(0)
    model = CostModel(key, [*broken[:4], *good, *broken[4:]])
    assert model.records == 3 and model.skipped == len(broken)
    assert model.update() and model.rank([space.default(), fastest])[0] == fastest
    other_target = {**good[0], "key": {**good[0]["key"], "target": {"kind": "cuda"}}}
    assert CostModel(key, [other_target]).records == 0  # another target's times are not this one's

    database = TuningDatabase(tmp_path / "db.jsonl")  # the same through the file, with lines that are not JSON
    with open(database.path, "w") as handle:
        for record in [*good, *(r for r in broken if isinstance(r, dict) and "key_hash" in r)]:
            handle.write(json.dumps(record) + "\n")
        handle.write('{"key_hash": "cut off\n')
    with pytest.warns(UserWarning):
        loaded = CostModel.from_database(database, key)
    assert loaded.records == 3 and loaded.update()


def test_features_describe_any_input_kind_format_and_knob():
    relational = {"shape": [10, 12], "relations": 3, "nnz": 40, "relation_nnz": [10, 20, 10],
                  "degree_histogram": [5, 10, 10, 5]}
    features = case_features(relational, [8, 4], "float32")
    assert features["log_relations"] == 2.0 and features["log_feat"] == 5.0 and features["dtype=float32"] == 1.0
    assert features["empty_rows"] == pytest.approx(5 / 30)
    hyb = config_features({"format": "hyb:2:1,2,4", "unroll": 4, "vector_width": None, "specialize": True,
                           "dataflow": "gather"})
    assert hyb["format=hyb"] == 1.0 and hyb["format.text=hyb:2:1,2,4"] == 1.0 and hyb["format.hyb.buckets.count"] == 3.0
    assert hyb["knob.unroll=4"] == 1.0  # a number is also a one-hot: a linear model can prefer a middle value
    assert hyb["knob.vector_width=None"] == 1.0 and hyb["knob.specialize"] == 1.0
    assert hyb["knob.dataflow=gather"] == 1.0 and hyb["knob.unroll"] == pytest.approx(math.log2(5))
    with pytest.raises(ValueError, match="format"):
        config_features({"unroll": 4})
