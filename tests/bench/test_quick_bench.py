"""The quick CPU benchmark runs end to end; a wrong contender is reported, never timed."""

import json
import os
import re

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.bench import engine, quick, threads
from sparsetir.bench.datasets import load_matrix
from sparsetir.bench.locality import local_columns
from sparsetir.reference import get_reference

SPMM = get_reference("spmm")

SMALL = "synthetic:300x200:0.05"
FAST = ["--samples", "5", "--max-time-s", "1", "--no-bounds"]


@pytest.fixture(autouse=True)
def restore_environment():
    """quick.main sets spin and thread variables with setdefault; undo that after each test."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.parametrize("op,libraries", [
    ("spmm", ["scipy", "torch-csr-i64", "torch-csr-i32", "torch-reduce-sum"]),
    ("sddmm", ["scipy", "torch-sampled-addmm"]),
])
def test_quick_runs_end_to_end_on_a_synthetic_matrix(op, libraries, tmp_path, capsys):
    out_json = tmp_path / "records.json"
    assert quick.main([op, "--dataset", SMALL, "--feat", "8", "--feat", "16", *FAST, "--json", str(out_json)]) == 0
    printed = capsys.readouterr().out
    assert "geomean speedup vs best CPU library over 2 case(s)" in printed
    assert printed.count(f"{SMALL} (300 x 200,") == 2
    assert "sparsetir" in printed
    document = json.loads(out_json.read_text())
    assert document["environment"]["env"]["GOMP_SPINCOUNT"] is not None
    assert document["copy_bandwidth"]["bytes_per_s"] > 0
    timed = {(r["feat"], r["contender"]) for r in document["records"] if r["ok"]}
    assert {(feat, name) for feat in (8, 16) for name in libraries} <= timed
    for r in document["records"]:
        assert r["ok"] == (r["stats"] is not None), r
        if r["ok"]:
            assert r["stats"]["n"] >= 5 and r["setup_s"] >= 0
        else:
            assert r["error"]


def test_spin_limits_are_set_for_the_cli_process(monkeypatch):
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setenv("TVM_THREAD_POOL_SPIN_COUNT", "7")
    threads.configure_threads(2)
    assert os.environ["GOMP_SPINCOUNT"] == "10000"
    assert os.environ["TVM_THREAD_POOL_SPIN_COUNT"] == "7"  # a user's setting wins


def test_a_wrong_contender_is_reported_not_timed():
    A = sp.random(20, 10, density=0.3, format="csr", dtype=np.float32, random_state=0)
    case = SPMM.make_case(A, 4, np.random.default_rng(0))
    B = case.inputs[0]
    right = engine.prepare(engine.Row("right", "conversion"), lambda: (lambda: A @ B), case)
    wrong = engine.prepare(engine.Row("wrong", "conversion"), lambda: (lambda: A @ B + 1e-3), case)
    broken = engine.prepare(engine.Row("broken", "conversion"), lambda: 1 / 0, case)
    assert right.error is None and right.run is not None
    assert wrong.error.startswith("wrong result") and wrong.run is None
    assert broken.error.startswith("unavailable: ZeroDivisionError") and broken.run is None


def test_synthetic_spec_is_validated():
    A = load_matrix("synthetic:50x40:0.1", seed=0)
    assert A.shape == (50, 40) and A.dtype == np.float32 and A.has_canonical_format
    with pytest.raises(ValueError, match="synthetic:<m>x<n>:<density>"):
        load_matrix("synthetic:50by40", seed=0)


def test_excluded_contenders_are_not_run_and_dense_torch_only_on_request(capsys):
    assert quick.main(["spmm", "--dataset", SMALL, "--feat", "4", *FAST, "--exclude", "scipy"]) == 0
    table = capsys.readouterr().out.split("feat 4")[1].split("geomean")[0]
    assert "scipy" not in table and "torch-dense" not in table and "torch-csr-i32" in table
    assert quick.main(["spmm", "--dataset", SMALL, "--feat", "4", *FAST, "--dense"]) == 0
    assert "torch-dense" in capsys.readouterr().out.split("feat 4")[1].split("geomean")[0]


@pytest.mark.slow
def test_tune_adds_a_tuned_contender_with_its_tuning_time(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPARSETIR_TUNE_DATABASE", str(tmp_path / "db.jsonl"))
    out_json = tmp_path / "records.json"
    assert quick.main(["spmm", "--dataset", SMALL, "--feat", "8", *FAST, "--tune", "2",
                       "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "sparsetir-tuned" in out and re.search(r"tuning: \d+ compiled .*, \d+ measured; default ", out)
    tuned = next(r for r in json.loads(out_json.read_text())["records"] if r["contender"] == "sparsetir-tuned")
    assert tuned["ok"] and tuned["timings"]["tune_s"] > 0
    tuning = tuned["tuning"]  # the tuner's report of the case, beside every row of it
    assert tuning["measured"] >= 1 and tuning["compiled"] >= tuning["measured"] and tuning["median_s"] > 0
    assert tuning["bound_s"] is None  # --no-bounds: no bound to report
    assert (tmp_path / "db.jsonl").read_text().count("\n") == 1


@pytest.mark.parametrize("op", ["spmm", "sddmm"])
def test_locality_bound_is_timed_and_checked_against_its_own_matrix(op, tmp_path, capsys):
    out_json = tmp_path / "records.json"
    assert quick.main([op, "--dataset", SMALL, "--feat", "8", *FAST, "--locality-bound",
                       "--json", str(out_json)]) == 0
    assert quick.LOCALITY_BOUND in capsys.readouterr().out
    bound = next(r for r in json.loads(out_json.read_text())["records"] if r["contender"] == quick.LOCALITY_BOUND)
    assert bound["ok"], bound["error"]  # a check against A's own reference would have failed
    assert bound["speedup_vs_best"] > 0


def test_locality_bound_refuses_a_kernel_that_computes_the_real_product():
    A = load_matrix(SMALL, seed=0)
    case = SPMM.make_case(A, 4, np.random.default_rng(0))
    real = engine.prepare(engine.Row("real", "conversion"), lambda: (lambda: A @ case.inputs[0]),
                         SPMM.reference(A, case.inputs[0]))
    assert real.error is None
    wrong = engine.prepare(engine.Row("wrong", "conversion"), lambda: (lambda: A @ case.inputs[0]),
                          SPMM.reference(local_columns(A), case.inputs[0]))
    assert wrong.error.startswith("wrong result")


def test_bounds_measure_the_machine_and_give_every_row_a_percent_of_bound(tmp_path, capsys):
    out_json = tmp_path / "records.json"
    fast_with_bounds = [arg for arg in FAST if arg != "--no-bounds"]
    assert quick.main(["spmm", "--dataset", SMALL, "--feat", "8", *fast_with_bounds, "--json", str(out_json)]) == 0
    printed = capsys.readouterr().out
    assert "machine: copy" in printed and "% bound" in printed and "bounds: dram" in printed
    document = json.loads(out_json.read_text())
    assert document["machine"]["fma_flops"] > 0
    timed = [r for r in document["records"] if r["ok"]]
    assert timed and all(r["bound_fraction"] > 0 and r["bounds"]["tight"] in ("dram", "gather", "flops")
                         for r in timed)
