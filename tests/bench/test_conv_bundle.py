"""Sparse convolution in the GPU bundle: one kernel per (layer, dataflow) built here with the layers' kernel
maps, and the runner, with only the TVM runtime, checks and times them with the baselines on the device,
writing records the conv tables read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_bundle import run_bundle

from sparsetir.bench.bundle import build_bundle, read_manifest
from sparsetir.bench.records import read_records

CLOUD = "lidar:800"
TINY = {"flush": False, "samples": 3, "min_samples": 3, "max_time_s": 0.2, "warmup_s": 0.0, "min_warmup": 1}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A CPU bundle: one SpMM candidate on cora, and both dataflows for a strided layer (spconv orders its
    outputs itself there)."""
    out = tmp_path_factory.mktemp("conv-bundle") / "gpu-bundle"
    build_bundle(out, ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False, timing=TINY,
                 baselines=["scipy_sparse"],
                 conv={"clouds": [CLOUD], "voxel_size": 0.3, "layers": ["8:8:2@0"],
                       "baselines": ["spconv", "torch-gather-mm", "torchsparse"]})
    return out


def test_the_bundle_holds_each_layers_map_and_both_dataflows(bundle):
    section = read_manifest(bundle)["conv"]
    assert [case["layer"] for case in section["cases"]] == ["8:8:2@0"]
    for case in section["cases"]:
        assert case["cloud"] == CLOUD and [c["config"] for c in case["candidates"]] == [{"format": "csf"},
                                                                                        {"format": "relcsr"}]
        with np.load(bundle / case["input"]) as arrays:
            assert arrays["indptr"].shape == (28,) and arrays["in_idx"].shape == arrays["out_idx"].shape
        for candidate in case["candidates"]:
            for field in ("library", "manifest", "structure"):
                assert (bundle / candidate[field]).is_file()


@pytest.mark.slow  # the runner in its own process: imports, the reference, every contender checked and timed
def test_the_runner_checks_and_times_conv_candidates_and_baselines_with_the_runtime_only(bundle, tmp_path):
    run = run_bundle(bundle, tmp_path / "out")
    assert run.returncode == 0, run.stderr + run.stdout
    status = json.loads((tmp_path / "out" / "run.json").read_text())
    assert status["tvm_compiler_loaded"] is False and "records/conv/lidar-800-v0.3.json" in status["files"]
    records = read_records([tmp_path / "out" / "records" / "conv" / "lidar-800-v0.3.json"])
    by_layer = {}
    for record in records:
        assert record["experiment"] == "conv" and record["provenance"]["runtime_only"]
        by_layer.setdefault(record["conv"]["layer"], {})[record["contender"]] = record
    assert set(by_layer) == {"8:8:2@0"}
    for found in by_layer.values():
        assert all(found[name]["status"] == "ok" for name in ("sparsetir[csf]", "sparsetir[relcsr]",
                                                               "torch-gather-mm"))
        assert found["torchsparse"]["status"] == "unavailable"
        assert found["spconv"]["status"] in ("ok", "wrong", "unavailable")  # spconv's threads: see baselines/conv.py
        assert found["sparsetir[csf]"]["conv"]["speedup_vs_best"] > 0
    from sparsetir.bench.report.families import conv as report

    frame = report.workflow_tables(  # the conv tables read the GPU host's records
        [tmp_path / "out" / "records" / "conv" / "lidar-800-v0.3.json"],
        {"csv": tmp_path / "s.csv", "md": tmp_path / "s.md", "tex": tmp_path / "s.tex"}, {})
    assert {"sparsetir[csf]", "sparsetir[relcsr]", "torch-gather-mm"} <= set(frame["contender"])


def test_bad_conv_bundle_settings_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown conv baseline 'mkl'"):
        build_bundle(tmp_path / "b", ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False,
                     conv={"clouds": [CLOUD], "baselines": ["mkl"]})
    with pytest.raises(ValueError, match="unknown point cloud"):
        build_bundle(tmp_path / "b", ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False,
                     conv={"clouds": ["cora"]})
