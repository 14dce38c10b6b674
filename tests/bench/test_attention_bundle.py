"""Block-sparse attention in the GPU bundle: one kernel per (case, format) built here with the case's
layout, and the runner, with only the TVM runtime, checks and times them with the torch baselines on
the device, writing records the attention tables read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_bundle import run_bundle

from sparsetir.bench.bundle import build_bundle, read_manifest
from sparsetir.bench.records import read_records
from sparsetir.data import masks

TINY = {"flush": False, "samples": 3, "min_samples": 3, "max_time_s": 0.2, "warmup_s": 0.0, "min_warmup": 1}
ATTENTION = {"seqs": [64], "masks": {"band": {"kind": "longformer", "window": 16}}, "heads": 2, "head_dim": 16,
             "dtype": "float32", "limit": 2, "baselines": ["sdpa-dense-mask", "torch-bsr", "triton-blocksparse"]}


def attention_tables():
    """The attention tables (``sparsetir.bench.report.families.attention``)."""
    from sparsetir.bench.report.families import attention as module

    return module


WEIGHT = "transformer/magnitude/0.98/ffn_conv1"  # embedded in data/ (and in the mirror)
PRUNEDBERT = {"matrices": [WEIGHT], "tokens": 8, "formats": {"sparsetir-csr": "csr", "sparsetir-bsr-32": "bsr:32"}}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A CPU bundle: one SpMM candidate on cora, BSR and DBSR attention on a band, and one PrunedBERT
    weight (embedded: no mirror needed) in CSR and BSR."""
    out = tmp_path_factory.mktemp("attention-bundle") / "gpu-bundle"
    build_bundle(out, ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False, timing=TINY,
                 baselines=["scipy_sparse"], attention={**ATTENTION, "prunedbert": PRUNEDBERT})
    return out


@pytest.fixture(scope="module")
def ran(bundle, tmp_path_factory) -> Path:
    """The runner's output folder, after ``run.sh`` ran the bundle (only the TVM runtime)."""
    out = tmp_path_factory.mktemp("attention-run") / "out"
    run = run_bundle(bundle, out)
    assert run.returncode == 0, run.stderr + run.stdout
    return out


def test_the_bundle_holds_each_cases_layout_and_its_candidates(bundle):
    section = read_manifest(bundle)["attention"]
    assert [case["case"] for case in section["cases"]] == ["band-seq64"]
    assert section["heads"] == 2 and section["dtype"] == "float32"
    case = section["cases"][0]
    assert [c["config"]["format"] for c in case["candidates"]] == ["bsr", "dbsr"]
    with np.load(bundle / case["input"]) as arrays:
        np.testing.assert_array_equal(arrays["layout"], masks.longformer(64, 16, 16))
    for candidate in case["candidates"]:
        for field in ("library", "manifest", "structure"):
            assert (bundle / candidate[field]).is_file()


@pytest.mark.slow  # the runner in its own process: imports, the reference, every contender checked and timed
def test_the_runner_checks_and_times_attention_with_the_runtime_only(ran, tmp_path):
    status = json.loads((ran / "run.json").read_text())
    assert status["tvm_compiler_loaded"] is False and "records/attention/seq64.json" in status["files"]
    records = read_records([ran / "records" / "attention" / "seq64.json"])
    found = {record["contender"]: record for record in records}
    for name in ("sparsetir-bsr", "sparsetir-dbsr", "sdpa-dense-mask", "torch-bsr"):
        assert found[name]["status"] == "ok", found[name].get("reason")
        assert found[name]["experiment"] == "attention" and found[name]["provenance"]["runtime_only"]
    assert found["triton-blocksparse"]["status"] == "unavailable"  # CUDA only
    frame = attention_tables().write_tables(records, tmp_path / "s.csv", tmp_path / "s.md", tmp_path / "s.tex",
                                            ["sdpa-dense-mask", "torch-bsr"])  # the attention tables read the GPU host's records
    ours = frame[frame["contender"] == "sparsetir-bsr"].iloc[0]
    assert ours["speedup_vs_reference"] > 0 and ours["mask"] == "band"


def test_bad_attention_bundle_settings_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match=r"bundle baseline.*sdpa-dense.*something else"):
        build_bundle(tmp_path / "b", ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False,
                     attention={**ATTENTION, "baselines": ["sdpa-dense"]})
    with pytest.raises(ValueError, match="unknown attention mask kind"):
        build_bundle(tmp_path / "b", ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False,
                     attention={**ATTENTION, "masks": {"x": {"kind": "checkerboard"}}})


@pytest.mark.slow  # the runner in its own process (shared with the test above)
def test_prunedbert_weights_are_built_checked_and_timed_against_dense(bundle, ran, tmp_path):
    section = read_manifest(bundle)["attention"]
    assert [c["case"] for c in section["prunedbert"]["cases"]] == [WEIGHT]
    records = read_records([ran / "records" / "attention" / "prunedbert.json"])
    found = {record["contender"]: record for record in records}
    assert set(found) == {"sparsetir-csr", "sparsetir-bsr-32", "torch-dense", "torch-csr-i32"}
    assert all(record["status"] == "ok" and record["experiment"] == "prunedbert" for record in records)
    frame = attention_tables().write_tables(records, tmp_path / "s.csv", tmp_path / "s.md", tmp_path / "s.tex", [],
                                            "torch-dense")
    assert "Best sparse format per weight" in (tmp_path / "s.md").read_text()
    assert (frame[frame["contender"] == "sparsetir-csr"]["speedup_vs_reference"] > 0).all()
