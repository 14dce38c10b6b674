"""Tune here, measure there: a bundle builds, its runner runs with only the TVM runtime, and
ingesting the records it writes puts the fastest correct candidate into the tuning database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sparsetir.bench.bundle import BundleTooLarge, build_bundle, folder_bytes, ingest, read_manifest, runner_wheels
from sparsetir.bench.records import read_records

CORA_FEAT = 8
REPO_ROOT = Path(__file__).resolve().parents[2]  # run.sh finds the working tree in its current folder


def run_bundle(bundle: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    """``run.sh`` as the GPU host runs it (PYTHON: this interpreter, which has tvm_ffi)."""
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("SPARSETIR_TVM_RUNTIME_DIR", None)  # run.sh points it at the bundle's lib/
    return subprocess.run(["bash", str(bundle / "run.sh"), "--out", str(out), *args], capture_output=True,
                          text=True, timeout=900, env=env, cwd=REPO_ROOT)  # a hang catcher


@pytest.fixture(scope="module")
def llvm_bundle(tmp_path_factory) -> Path:
    """A CPU bundle: cora, one feature size, three candidates, no wheel."""
    out = tmp_path_factory.mktemp("bundle") / "gpu-bundle"
    build_bundle(out, ["cora"], [CORA_FEAT], target="llvm", limit=3, wheel=False, progress=False,
                 hyb_formats={"cora": "hyb:1:1,2,4,8,16"},  # hyb is a GPU format: out of the CPU space, given here
                 timing={"flush": False, "samples": 5, "min_samples": 3, "max_time_s": 0.2, "warmup_s": 0.0,
                         "min_warmup": 1}, baselines=["scipy_sparse"])
    return out


def test_llvm_bundle_holds_kernels_inputs_runtime_and_a_runner(llvm_bundle):
    manifest = read_manifest(llvm_bundle)
    (case,) = manifest["cases"]
    assert (case["dataset"], case["feat"], len(case["candidates"])) == ("cora", CORA_FEAT, 3)
    assert case["candidates"][0]["config"]["format"] == "csr"
    assert any(c["config"]["format"].startswith("hyb:") for c in case["candidates"])
    for candidate in case["candidates"]:
        for field in ("library", "manifest", "structure"):
            assert (llvm_bundle / candidate[field]).is_file()
    assert (llvm_bundle / "lib" / "libtvm_runtime.so").is_file()
    assert (llvm_bundle / "inputs" / "cora.npz").is_file() and os.access(llvm_bundle / "run.sh", os.X_OK)
    assert manifest["wheels"] == [] and folder_bytes(llvm_bundle) < 60 << 20


@pytest.mark.slow
def test_runner_checks_times_and_ingest_picks_the_best(llvm_bundle, tmp_path, monkeypatch):
    """One candidate's values are doubled in the bundle: the runner must call it wrong, and
    ingest must pick the fastest of the correct ones."""
    manifest = read_manifest(llvm_bundle)
    tampered = manifest["cases"][0]["candidates"][0]  # the CSR candidate
    structure = llvm_bundle / tampered["structure"]
    original_bytes = structure.read_bytes()
    with np.load(structure) as arrays:
        original = {name: arrays[name] for name in arrays.files}
    try:
        np.savez_compressed(structure, **{**original, "A": original["A"] * 2})
        run = run_bundle(llvm_bundle, tmp_path / "out")
    finally:
        structure.write_bytes(original_bytes)
    assert run.returncode == 0, run.stderr + run.stdout
    assert "case 1/1 cora feat 8" in run.stdout
    status = json.loads((tmp_path / "out" / "run.json").read_text())
    assert status["finished"] and status["cases_done"] == 1 and status["tvm_compiler_loaded"] is False
    records = read_records(sorted((tmp_path / "out" / "records").glob("*.json")))  # validates each
    by_name = {r["contender"]: r for r in records}
    refused = by_name[f"sparsetir[{tampered['id']}]"]  # its sha256 no longer matches: never timed
    assert refused["status"] == "unavailable" and "sha256" in refused["reason"]
    correct = [r for r in records if "candidate" in r and r["status"] == "ok"]
    untouched = [c for c in manifest["cases"][0]["candidates"] if c["structure"] != tampered["structure"]]
    assert len(correct) == len(untouched) >= 1 and by_name["scipy"]["status"] == "ok"  # csr candidates share it
    assert all(r["provenance"]["runtime_only"] and r["provenance"]["bundle"]["id"] == manifest["id"] for r in records)

    monkeypatch.setenv("SPARSETIR_CACHE_DIR", str(tmp_path / "cache"))
    from sparsetir.tune.database import TuningDatabase

    added = ingest(tmp_path / "out", reference_dir=tmp_path / "reference", progress=False)
    best = min(correct, key=lambda r: r["stats"]["median"])
    stored = TuningDatabase().lookup(manifest["cases"][0]["tuning_key"])
    assert len(added) == 1 and stored["config"] == best["candidate"]["config"] and stored["source"] == "bundle"
    merged = {r["contender"]: r for r in read_records([tmp_path / "reference" / "bundle-cora-feat8.json"])}
    assert merged["sparsetir-tuned"]["variant"] == best["variant"] and "scipy" in merged
    assert "sparsetir-hyb" in merged and not any(name.startswith("sparsetir[") for name in merged)
    assert (tmp_path / "reference" / "bundle-raw" / "cora-feat8.json").is_file()


def test_the_database_key_is_the_one_format_auto_looks_up(llvm_bundle):
    from sparsetir.backend import normalize_target
    from sparsetir.bench.datasets import load_matrix
    from sparsetir.formats import read_sparse_input
    from sparsetir.tune import fingerprint, tuning_key

    matrix = read_sparse_input(load_matrix("cora", 0), canonical=True)
    key = tuning_key("spmm", fingerprint(matrix), CORA_FEAT, "float32", normalize_target("llvm"))
    assert read_manifest(llvm_bundle)["cases"][0]["tuning_key"] == key


@pytest.mark.slow
def test_runner_starts_no_case_past_its_time_limit(llvm_bundle, tmp_path):
    run = run_bundle(llvm_bundle, tmp_path / "out", "--time-limit-s", "0.001")
    assert run.returncode == 0, run.stderr
    status = json.loads((tmp_path / "out" / "run.json").read_text())
    assert status["cases_done"] == 0 and status["stopped"].startswith("time limit")
    assert not list((tmp_path / "out" / "records").glob("*.json"))


@pytest.mark.slow
def test_cuda_bundle_has_device_code_and_stays_under_the_limit(tmp_path):
    from sparsetir.backend.cuda import nvcc_available
    from sparsetir.backend.fatbin import fatbin_entries

    if not nvcc_available()[0]:
        pytest.skip("nvcc is not installed")
    try:
        runner_wheels()
        wheel = True
    except RuntimeError:  # offline: the wheel is the only thing that needs PyPI
        wheel = False
    out = tmp_path / "gpu-bundle"
    manifest = build_bundle(out, ["cora"], [32], limit=2, wheel=wheel, progress=False)
    assert manifest["device"] == "cuda" and manifest["target"]["kind"] == "cuda"
    assert {p.name for p in (out / "lib").iterdir()} == {"libtvm_runtime.so", "libtvm_runtime_cuda.so",
                                                         "libcudart.so.13"}
    assert len(manifest["wheels"]) == (2 if wheel else 0) and folder_bytes(out) < 60 << 20
    for library in manifest["kernels"]:
        kinds = {(entry.kind, entry.arch) for entry in fatbin_entries(out / library)}
        assert ("ELF", "sm_90") in kinds and ("PTX", "sm_90") in kinds, kinds
        assert (out / (library + ".cu")).read_text().count("__global__")
    from sparsetir.runtime import cuda_available

    if not cuda_available()[0]:  # the runner says so, instead of failing somewhere inside
        run = run_bundle(out, tmp_path / "out")
        assert run.returncode == 2 and "cannot run a CUDA bundle here" in run.stderr, run.stderr


def test_kernels_compiled_for_symbolic_sizes_are_shared_between_graphs(tmp_path):
    manifest = build_bundle(tmp_path / "b", ["cora", "citeseer"], [CORA_FEAT], target="llvm", limit=1, wheel=False,
                            progress=False)
    libraries = [case["candidates"][0]["library"] for case in manifest["cases"]]
    assert libraries[0] == libraries[1] and len(manifest["kernels"]) == 1
    assert manifest["kernels"][libraries[0]]["used_by"] == 2


@pytest.mark.parametrize("change,error,message", [
    ({"datasets": ["no-such-graph"]}, ValueError, "unknown dataset 'no-such-graph'"),
    ({"datasets": []}, ValueError, "non-empty list of dataset names"),
    ({"feats": [0]}, ValueError, "positive ints"),
    ({"limit": 0}, ValueError, "limit must be a positive int"),
    ({"knob_settings": []}, ValueError, "knob_settings is empty"),
    ({"knob_settings": [{"no_such_knob": 1}]}, ValueError, "unknown cpu knob"),
    ({"max_bytes": 1 << 20}, BundleTooLarge, "over its 1.0 MiB limit"),
    ({"target": "rocm"}, ValueError, "target must be"),
])
def test_bad_input_is_a_clear_error_and_leaves_nothing_behind(tmp_path, change, error, message):
    options = {"datasets": ["cora"], "feats": [CORA_FEAT], "target": "llvm", "limit": 2, "wheel": False,
               "progress": False, **change}
    with pytest.raises(error, match=message):
        build_bundle(tmp_path / "bundle", options.pop("datasets"), options.pop("feats"), **options)
    assert list(tmp_path.iterdir()) == []


def test_ingest_without_records_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no record files"):
        ingest(tmp_path, reference_dir=tmp_path / "reference", progress=False)
    with pytest.raises(ValueError, match="does not exist"):
        ingest(tmp_path / "missing", reference_dir=tmp_path / "reference", progress=False)
