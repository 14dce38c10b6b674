"""The tuner's entry points and what it returns without searching: tune_spmm/tune_sddmm, auto_config's
budget, a database hit, a CUDA target, and a TuneResult as a dict.

Nothing compiles or is measured here: where the tuner could build a measurer, the stand-in fails the test.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.backend import normalize_target
from sparsetir.formats import read_sparse_input
from sparsetir.tune import TuningDatabase, tune_sddmm, tune_spmm, tuner
from sparsetir.tune.database import tuning_key
from sparsetir.tune.fingerprint import fingerprint


class NoMeasurer:
    def __init__(self, *args, **options):
        raise AssertionError("the tuner built a measurer")


@pytest.fixture
def matrix() -> sp.csr_matrix:
    return sp.csr_matrix(np.array([[1, 0, 2, 0, 0], [0, 3, 0, 0, 0], [4, 0, 0, 5, 0]], dtype=np.float32))


@pytest.fixture
def db(tmp_path, monkeypatch) -> TuningDatabase:
    monkeypatch.setattr(tuner, "Measurer", NoMeasurer)
    return TuningDatabase(tmp_path / "tune.jsonl")


def stored_key(matrix, feat=8, op="spmm") -> dict:
    return tuner.problem(op, matrix, feat, "llvm", None)[-1]


def test_the_key_names_the_op_the_structure_the_feature_size_the_dtype_and_the_target(matrix):
    structure = fingerprint(read_sparse_input(matrix, canonical=True))
    A, feats, target, device, dtype, key = tuner.problem("spmm", matrix, 8, "llvm", None)
    assert (feats, device, dtype, A.dtype) == ((8,), "cpu", "float32", np.float32)  # the matrix's own dtype
    assert key == tuning_key("spmm", structure, 8, "float32", normalize_target("llvm"))
    A, _, _, _, dtype, key = tuner.problem("sddmm", matrix, 4, "llvm", "float64")
    assert (dtype, A.dtype) == ("float64", np.float64)  # cast to the dtype asked for
    assert key == tuning_key("sddmm", structure, 4, "float64", normalize_target("llvm"))


def test_a_database_hit_returns_the_stored_result_without_measuring(db, matrix, capsys):
    key = stored_key(matrix)
    db.add(key, {"format": "f4"}, median_s=2e-3, source="bundle", default_median_s=5e-3, tune_s=12.5, trials=9,
           strategy="evolutionary", measurements=[{"config": {"format": "f4"}}], finalists=[{"median_s": 2e-3}])
    result = tuner.tune("spmm", matrix, 8, workers=1, database=db)
    assert result.from_database and result.op == "spmm" and result.key == key
    assert (result.config, result.median_s, result.default_median_s) == ({"format": "f4"}, 2e-3, 5e-3)
    assert (result.tune_s, result.trials, result.strategy) == (12.5, 9, "evolutionary")
    assert result.measurements == [{"config": {"format": "f4"}}] and result.finalists == [{"median_s": 2e-3}]
    out, err = capsys.readouterr()
    assert out == "" and err == "[tune spmm] database hit: {'format': 'f4'}\n"


def test_a_database_hit_is_silent_without_progress(db, matrix, capsys):
    db.add(stored_key(matrix), {"format": "f4"}, median_s=2e-3, source="bundle")
    tune_spmm(matrix, 8, workers=1, database=db, progress=False)
    assert capsys.readouterr() == ("", "")


def test_a_sparse_database_record_fills_in_defaults(db, matrix):
    db.add(stored_key(matrix), {"format": "f2"}, median_s=None, source="bundle", tune_s=None)
    result = tune_spmm(matrix, 8, workers=1, database=db, progress=False)
    assert result.from_database and result.config == {"format": "f2"}
    assert (result.median_s, result.default_median_s, result.tune_s, result.trials) == (None, None, 0.0, 0)
    assert (result.measurements, result.strategy, result.finalists) == ([], "", [])


def test_a_cuda_target_is_sent_to_the_gpu_bundle(db, matrix):
    message = ("tuning measures candidates on this machine, which runs CPU (llvm) kernels only; for cuda, build a "
               "bundle (python -m sparsetir.bench.bundle build), time it on the GPU host and ingest the records")
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        tune_spmm(matrix, 8, target="cuda", trials=2, workers=1, database=db, progress=False)


# ---------------------------------------------------------------- the entry points


@pytest.fixture
def tune_calls(monkeypatch) -> list:
    calls = []

    def recorded(op, A, feat, **options):
        calls.append((op, A, feat, options))
        return tuner.TuneResult(op, {"format": "csr"}, None, None, {})

    monkeypatch.setattr(tuner, "tune", recorded)
    return calls


def test_tune_spmm_and_tune_sddmm_name_their_op(tune_calls, matrix):
    tune_spmm(matrix, 8, trials=3)
    tune_sddmm(matrix, 4, budget_s=5, workers=2)
    tune_sddmm(matrix, 4)
    assert tune_calls == [("spmm", matrix, 8, {"target": "llvm", "budget_s": tuner.DEFAULT_BUDGET_S, "trials": 3}),
                          ("sddmm", matrix, 4, {"target": "llvm", "budget_s": 5, "workers": 2}),
                          ("sddmm", matrix, 4, {"target": "llvm", "budget_s": tuner.DEFAULT_BUDGET_S})]


def test_auto_config_tunes_with_the_budget_from_the_environment(tune_calls, matrix, monkeypatch):
    monkeypatch.delenv(tuner.AUTO_BUDGET_ENV, raising=False)
    assert tuner.auto_config("spmm", matrix, 8) == {"format": "csr"}
    monkeypatch.setenv(tuner.AUTO_BUDGET_ENV, "7.5")
    tuner.auto_config("sddmm", matrix, 4, target="llvm -mcpu=generic", dtype="float64")
    assert tune_calls == [
        ("spmm", matrix, 8, {"target": "llvm", "dtype": None, "budget_s": tuner.DEFAULT_AUTO_BUDGET_S}),
        ("sddmm", matrix, 4, {"target": "llvm -mcpu=generic", "dtype": "float64", "budget_s": 7.5})]


def test_a_tune_result_as_a_dict():
    result = tuner.TuneResult("spmm", {"format": "csr"}, 1e-3, 3e-3, {"op": "spmm"}, [{"m": 1}], 2.5, 4, "random",
                              finalists=[{"f": 1}])
    assert result.speedup_over_default == pytest.approx(3.0)
    expected = {
        "op": "spmm", "config": {"format": "csr"}, "median_s": 1e-3, "default_median_s": 3e-3,
        "key_hash": tuner.key_hash({"op": "spmm"}), "key": {"op": "spmm"}, "tune_s": 2.5, "trials": 4,
        "strategy": "random", "from_database": False, "finalists": [{"f": 1}], "measurements": [{"m": 1}]}
    as_dict = result.to_dict()
    assert {name: as_dict[name] for name in expected} == expected
    assert tuner.TuneResult("spmm", {}, None, 3e-3, {}).speedup_over_default is None
    assert tuner.TuneResult("spmm", {}, 1e-3, None, {}).speedup_over_default is None
