"""GraphSAGE's aggregation kernels in the GPU bundle: every stage built here, and the runner, with only the
TVM runtime, checks each against the float64 reference and times it with its baselines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparsetir.bench.bundle import build_bundle, read_manifest
from sparsetir.bench.bundle.sage import STAGES, section_baselines
from sparsetir.bench.records import read_records

GRAPH = "rmat:7:4"
REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = {"flush": False, "samples": 3, "min_samples": 3, "max_time_s": 0.2, "warmup_s": 0.0, "min_warmup": 1}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A CPU bundle: one SpMM candidate on cora, and the eight aggregation stages on a small R-MAT graph."""
    out = tmp_path_factory.mktemp("sage-bundle") / "gpu-bundle"
    build_bundle(out, ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False, timing=TINY,
                 baselines=["scipy_sparse"], sage={"datasets": [GRAPH], "feat": 6})
    return out


def test_the_bundle_holds_every_aggregation_stage_bound_to_its_structure(bundle):
    section = read_manifest(bundle)["sage"]
    assert section["feat"] == 6 and set(section["baselines"]["aggregate-max"]) == {"torch-scatter-amax",
                                                                                   "torch-sparse-amax"}
    (case,) = section["cases"]
    assert case["dataset"] == GRAPH and (bundle / case["input"]).is_file() and set(case["kernels"]) == set(STAGES)
    for entry in case["kernels"].values():
        assert all((bundle / entry[field]).is_file() for field in ("library", "manifest", "structure"))
    # the stages over A^T are bound to A^T's structure, the others to A's
    assert case["kernels"]["columns"]["structure"] == case["kernels"]["spread"]["structure"]
    assert case["kernels"]["rows"]["structure"] == case["kernels"]["reduce-max"]["structure"]


def test_the_runner_checks_and_times_every_stage_and_baseline_with_the_runtime_only(bundle, tmp_path):
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("SPARSETIR_TVM_RUNTIME_DIR", None)
    run = subprocess.run(["bash", str(bundle / "run.sh"), "--out", str(tmp_path / "out")], capture_output=True,
                         text=True, timeout=300, env=env, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr + run.stdout
    status = json.loads((tmp_path / "out" / "run.json").read_text())
    assert status["tvm_compiler_loaded"] is False and "records/sage/rmat-7-4.json" in status["files"]
    records = read_records([tmp_path / "out" / "records" / "sage" / "rmat-7-4.json"])
    ours = {r["op"]: r for r in records if r["contender"].startswith("sparsetir[")}
    assert set(ours) == {f"aggregate-{label}" for label in STAGES}
    assert all(r["status"] == "ok" and r["sage"]["kind"] == "sparsetir" for r in ours.values()), \
        [(r["op"], r["reason"]) for r in ours.values() if r["status"] != "ok"]
    baselines = {(r["op"], r["contender"]): r["status"] for r in records if r["sage"]["kind"] == "baseline"}
    assert baselines == {("aggregate-reduce-max", "torch-scatter-amax"): "ok",
                         ("aggregate-reduce-max", "torch-sparse-amax"): "ok",
                         ("aggregate-reduce-min", "torch-scatter-amin"): "ok",
                         ("aggregate-reduce-min", "torch-sparse-amin"): "ok",
                         ("aggregate-rows", "torch-csr-mean"): "ok",
                         ("aggregate-rows_masked", "torch-csr-mean-dropped"): "ok"}
    assert all(r["experiment"] == "sage-aggregate" and r["provenance"]["runtime_only"] for r in records)


def test_bad_sage_bundle_settings_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown sage bundle baseline"):
        section_baselines(["mkl-amax"], "cpu")
    assert section_baselines(["torch_gather"], "cuda")["aggregate-min"] == ["torch-scatter-amin"]
    with pytest.raises(ValueError, match="feat must be a positive int"):
        build_bundle(tmp_path / "b", ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False,
                     sage={"datasets": [GRAPH], "feat": 0})
    assert not (tmp_path / "b").exists()
