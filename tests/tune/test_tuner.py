"""The tuner: search, database, TuneResult.config usable in compile_spmm, format="auto"."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

import sparsetir
from sparsetir.formats import read_sparse_input
from sparsetir.ops import spmm
from sparsetir.tune import TuningDatabase, tune_sddmm, tune_spmm
from sparsetir.tune.database import DATABASE_ENV, tuning_key
from sparsetir.tune.fingerprint import fingerprint

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def matrix() -> sp.csr_matrix:
    rng = np.random.default_rng(7)
    A = sp.random(300, 250, density=0.03, format="csr", random_state=rng, dtype=np.float32)
    A = A.tolil()
    A[5, :] = 0  # an empty row
    A[9, :200] = 1.5  # a long row, split in hyb's largest bucket
    return A.tocsr()


@pytest.fixture
def database(tmp_path, monkeypatch) -> TuningDatabase:
    path = tmp_path / "tune.jsonl"
    monkeypatch.setenv(DATABASE_ENV, str(path))
    return TuningDatabase(path)


@pytest.mark.slow
def test_tune_spmm_returns_a_config_compile_spmm_accepts(matrix, database):
    result = tune_spmm(matrix, 16, budget_s=5, trials=6, workers=1, progress=False)
    assert not result.from_database
    assert 1 <= result.trials <= 6
    assert result.median_s > 0 and result.config["format"]
    assert {m["config"]["format"] for m in result.measurements} >= {"csr"}  # the default is always measured
    kernel = sparsetir.compile_spmm(matrix, 16, **result.config)
    B = np.random.default_rng(0).standard_normal((250, 16), dtype=np.float32)
    np.testing.assert_allclose(kernel(B), matrix @ B, rtol=1e-5, atol=1e-5)
    stored = database.lookup(result.key)
    assert stored["config"] == result.config and stored["source"] == "tuned"


@pytest.mark.slow
def test_second_tune_is_a_database_hit(matrix, database):
    first = tune_spmm(matrix, 8, budget_s=4, trials=3, workers=1, progress=False)
    again = tune_spmm(matrix, 8, budget_s=4, trials=3, workers=1, progress=False)
    assert again.from_database and again.config == first.config and again.tune_s == first.tune_s
    other_feat = tune_spmm(matrix, 8 * 2, budget_s=4, trials=2, workers=1, progress=False)
    assert not other_feat.from_database  # the key holds the feature size


@pytest.mark.slow
def test_format_auto_uses_the_database_then_tunes_on_a_miss(matrix, database, monkeypatch):
    B = np.random.default_rng(1).standard_normal((250, 8), dtype=np.float32)
    key = tuning_key("spmm", fingerprint(read_sparse_input(matrix, canonical=True)), 8, "float32",
                     sparsetir.backend.normalize_target("llvm"))
    database.add(key, {"format": "ell:4", "unroll": 0}, median_s=1.0, source="test")
    np.testing.assert_allclose(spmm(matrix, B, format="auto"), matrix @ B, rtol=1e-5, atol=1e-5)
    assert len(database.records()) == 1  # a hit: nothing tuned
    monkeypatch.setenv("SPARSETIR_TUNE_BUDGET_S", "2")
    np.testing.assert_allclose(spmm(matrix, B[:, :4].copy(), format="auto"), matrix @ B[:, :4], rtol=1e-5,
                               atol=1e-5)
    assert len(database.records()) == 2  # a miss: tuned and recorded


@pytest.mark.slow
def test_tune_sddmm(matrix, database):
    result = tune_sddmm(matrix, 8, budget_s=4, trials=3, workers=1, progress=False)
    kernel = sparsetir.compile_sddmm(matrix, 8, **result.config)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 8), dtype=np.float32)
    Y = rng.standard_normal((250, 8), dtype=np.float32)
    canonical = kernel.matrix
    rows = np.repeat(np.arange(300), np.diff(canonical.indptr))
    expected = canonical.values * np.einsum("ij,ij->i", X[rows], Y[canonical.indices])
    np.testing.assert_allclose(kernel(X, Y), expected, rtol=1e-4, atol=1e-5)
    auto = sparsetir.ops.sddmm(matrix, X, Y, format="auto")  # the database's configuration, no tuning
    np.testing.assert_allclose(auto.data, expected, rtol=1e-4, atol=1e-5)
    assert len(database.records()) == 1


def test_database_skips_malformed_lines_and_keeps_the_latest(tmp_path):
    db = TuningDatabase(tmp_path / "db.jsonl")
    key = {"op": "spmm", "feat": 4}
    db.add(key, {"format": "csr"}, median_s=2.0, source="tuned")
    with open(db.path, "a") as handle:
        handle.write("{not json\n")
    db.add(key, {"format": "hyb:1:1,2"}, median_s=1.0, source="bundle")
    with pytest.warns(UserWarning, match="malformed"):
        assert db.lookup(key)["config"] == {"format": "hyb:1:1,2"}
        assert db.lookup({"op": "spmm", "feat": 8}) is None
    assert json.loads(db.path.read_text().splitlines()[0])["source"] == "tuned"


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"budget_s": 0}, ValueError, "budget_s"),
    ({"budget_s": -1.0}, ValueError, "budget_s"),
    ({"trials": 0}, ValueError, "trials"),
    ({"strategy": "annealing"}, ValueError, "strategy"),
    ({"target": "cuda"}, RuntimeError, "bundle"),
    ({"target": "rocm"}, ValueError, "target"),
])
def test_bad_tuning_arguments(matrix, database, kwargs, error, match):
    options = {"budget_s": 3, "workers": 1, "progress": False, **kwargs}
    with pytest.raises(error, match=match):
        tune_spmm(matrix, 8, **options)


def test_bad_matrix_is_refused_before_tuning(database):
    broken = sp.csr_matrix((np.ones(2, np.float32), np.array([0, 9]), np.array([0, 1, 2])), shape=(2, 3))
    with pytest.raises(ValueError, match="out of range|index"):
        tune_spmm(broken, 8, budget_s=3, workers=1, progress=False)
    with pytest.raises(ValueError, match="feat"):
        tune_spmm(sp.eye(4, format="csr", dtype=np.float32), 0, budget_s=3, progress=False)


@pytest.mark.slow
def test_tune_rgms_searches_relational_formats_and_dataflows_and_auto_reads_the_database(database):
    from sparsetir.formats.relational import read_relational_input
    from sparsetir.ops import compile_rgms, rgms
    from sparsetir.reference.rgms import rgms_reference
    from sparsetir.tune import tune

    matrices = [sp.random(80, 80, density=0.05, format="csr", dtype=np.float32, random_state=r) for r in range(3)]
    result = tune("rgms", matrices, (8, 4), budget_s=30, trials=4, workers=1, progress=False)
    assert result.key["feat"] == [8, 4] and result.key["fingerprint"]["relations"] == 3
    assert {m["config"]["format"] for m in result.measurements} >= {"csf"}
    assert all(m["error"] is None for m in result.measurements), result.measurements
    matrix = read_relational_input(matrices)
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((80, 8), dtype=np.float32), rng.standard_normal((3, 8, 4), dtype=np.float32)
    case = rgms_reference(matrix, X, W)
    assert (np.abs(compile_rgms(matrices, 8, 4, **result.config)(X, W) - case.reference) <= case.tolerance).all()
    assert (np.abs(rgms(matrices, X, W, format="auto") - case.reference) <= case.tolerance).all()
    assert len(database.records()) == 1  # format="auto" was a database hit
