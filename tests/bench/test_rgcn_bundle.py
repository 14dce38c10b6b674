"""R-GCN in the GPU bundle: candidates (format x dataflow, one kernel per layer shape) are built here,
and the runner, with only the TVM runtime, checks and times them with the baselines on the device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparsetir.bench.bundle import build_bundle, read_manifest
from sparsetir.bench.records import read_records

GRAPH = "relational:200:3:1000"
REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = {"flush": False, "samples": 3, "min_samples": 3, "max_time_s": 0.2, "warmup_s": 0.0, "min_warmup": 1}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A CPU bundle: one SpMM candidate on cora, and two R-GCN candidates on a small random relational graph."""
    out = tmp_path_factory.mktemp("rgcn-bundle") / "gpu-bundle"
    build_bundle(out, ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False, timing=TINY,
                 baselines=["scipy_sparse"],
                 rgcn={"datasets": [GRAPH], "dims": [8, 6, 8], "limit": 2,
                       "baselines": ["torch-relation-loop", "dgl-relgraphconv", "graphiler"]})
    return out


def test_the_bundle_holds_one_kernel_per_layer_shape_for_each_rgcn_candidate(bundle):
    section = read_manifest(bundle)["rgcn"]
    assert section["dims"] == [8, 6, 8] and section["baselines"][-1] == "graphiler"
    (case,) = section["cases"]
    assert case["dataset"] == GRAPH and (bundle / case["input"]).is_file() and case["num_relations"] == 3
    assert [c["config"] for c in case["candidates"]] == [{"format": "csf", "dataflow": "aggregate"},
                                                         {"format": "csf", "dataflow": "edge"}]
    for candidate in case["candidates"]:
        assert set(candidate["layers"]) == {"8x6", "6x8"}
        for layer in candidate["layers"].values():
            for field in ("library", "manifest", "structure"):
                assert (bundle / layer[field]).is_file()


@pytest.mark.slow  # the runner in its own process: imports, the reference, every contender checked and timed
def test_the_runner_checks_and_times_rgcn_candidates_and_baselines_with_the_runtime_only(bundle, tmp_path):
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("SPARSETIR_TVM_RUNTIME_DIR", None)
    run = subprocess.run(["bash", str(bundle / "run.sh"), "--out", str(tmp_path / "out")], capture_output=True,
                         text=True, timeout=300, env=env, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr + run.stdout
    status = json.loads((tmp_path / "out" / "run.json").read_text())
    assert status["tvm_compiler_loaded"] is False and "records/rgcn/relational-200-3-1000.json" in status["files"]
    records = {r["contender"]: r for r in read_records([tmp_path / "out" / "records" / "rgcn" /
                                                       "relational-200-3-1000.json"])}
    ours = [r for name, r in records.items() if name.startswith("sparsetir[")]
    assert len(ours) == 2 and all(r["status"] == "ok" and r["rgcn"]["kind"] == "sparsetir" for r in ours)
    assert records["torch-relation-loop"]["status"] == "ok"
    assert records["graphiler"]["status"] == "unavailable"
    assert all(r["experiment"] == "rgcn" and r["provenance"]["runtime_only"] for r in records.values())


def test_bad_rgcn_bundle_settings_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown rgcn baseline 'mkl'"):
        build_bundle(tmp_path / "b", ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False,
                     rgcn={"datasets": [GRAPH], "dims": [8, 8, 8], "baselines": ["mkl"]})
    with pytest.raises(ValueError, match="unknown relational graph"):
        build_bundle(tmp_path / "b", ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False,
                     rgcn={"datasets": ["cora"], "dims": [8, 8, 8]})
    assert not (tmp_path / "b").exists()


@pytest.mark.slow  # nvcc: a dozen seconds per kernel
def test_cuda_rgcn_candidates_carry_device_code(tmp_path):
    from sparsetir.backend.cuda import nvcc_available
    from sparsetir.backend.fatbin import fatbin_entries

    if not nvcc_available()[0]:
        pytest.skip("nvcc is not installed")
    manifest = build_bundle(tmp_path / "b", ["cora"], [32], limit=1, wheel=False, progress=False,
                            rgcn={"datasets": [GRAPH], "dims": [32, 32, 32], "limit": 1})
    candidates = manifest["rgcn"]["cases"][0]["candidates"]  # limit 1, and the fp16 tensor-core tile (32 channels)
    assert len(candidates) >= 1
    for candidate in candidates:
        library = tmp_path / "b" / candidate["layers"]["32x32"]["library"]
        kinds = {(entry.kind, entry.arch) for entry in fatbin_entries(library)}
        assert ("ELF", "sm_90") in kinds and ("PTX", "sm_90") in kinds, (candidate, kinds)
