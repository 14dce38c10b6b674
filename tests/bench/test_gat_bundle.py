"""GAT in the GPU bundle: the fused attention's kernel sets (one per layer shape) built here, and the runner,
with only the TVM runtime, checks a 2-layer training step (output and the weights' gradients) against the
float64 reference and times it with PyG GATConv on the device; the CUDA sets, built with nvcc, run the
runner's own model code on the CUDA emulator."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_bundle import run_bundle

from sparsetir.bench.bundle import build_bundle, read_manifest
from sparsetir.bench.bundle.candidates import assemble_kernel
from sparsetir.bench.bundle.gat import candidate_factory, load_kernel_set
from sparsetir.bench.records import read_records
from sparsetir.reference import Case, host_array, result_mismatch
from sparsetir.reference.gat import gat_inputs, gat_reference

TINY = {"flush": False, "samples": 3, "min_samples": 3, "max_time_s": 0.2, "warmup_s": 0.0, "min_warmup": 1}
GAT = {"datasets": ["cora"], "heads": 2, "hidden": 4, "baselines": ["pyg-gatconv", "dgl-gatconv"]}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A CPU bundle: one SpMM candidate on cora, and GAT's kernel sets for a 2-head model on cora."""
    out = tmp_path_factory.mktemp("gat-bundle") / "gpu-bundle"
    build_bundle(out, ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False, timing=TINY,
                 baselines=["scipy_sparse"], gat=GAT)
    return out


def small_graph(n=9, seed=3):
    """A square adj_t (CSR, row = target) with an isolated node (6), repeated edges and a self-loop."""
    rng = np.random.default_rng(seed)
    rows = np.concatenate([rng.integers(0, n, 3 * n), [2, 2, 4]])
    cols = np.concatenate([rng.integers(0, n, 3 * n), [5, 5, 4]])
    keep = (rows != 6) & (cols != 6)
    rows, cols = rows[keep], cols[keep]
    order = np.lexsort((cols, rows))
    return np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64), \
        cols[order].astype(np.int64)


def test_the_bundle_holds_one_kernel_set_per_layer_shape(bundle):
    section = read_manifest(bundle)["gat"]
    assert section["heads"] == 2 and section["hidden"] == 4 and section["baselines"] == ["pyg-gatconv", "dgl-gatconv"]
    (case,) = section["cases"]
    assert case["dataset"] == "cora" and case["classes"] == 7 and case["in_features"] == 1433
    assert case["layers"] == ["h2f4", "h1f7"] and set(section["kernel_sets"]) == {"h2f4", "h1f7"}
    with np.load(bundle / case["input"]) as arrays:
        assert arrays["indptr"].shape == (case["nodes"] + 1,) and arrays["indices"].shape == (case["edges"],)
    for entry in section["kernel_sets"].values():
        assert set(entry["functions"]) == {"forward", "backward", "aggregate"}
        for function in entry["functions"].values():
            assert (bundle / function["library"]).is_file() and (bundle / function["manifest"]).is_file()


def test_a_step_checks_against_the_reference_and_a_wrong_structure_is_caught(bundle, tmp_path):
    """The bundle's sets on a small graph through the runner's own model code: the output and every weight's
    gradient within the tolerance; the same step without PyG's self-loops is refused by the check."""
    section = read_manifest(bundle)["gat"]
    sets = [load_kernel_set(bundle, section, key, tmp_path, assemble_kernel) for key in ("h2f4", "h1f7")]
    inputs = gat_inputs(*small_graph(), 5, heads=2, hidden=4, classes=7, seed=1)
    reference, tolerance = gat_reference(inputs)
    case = Case((inputs.X,), reference, tolerance, 0)
    got = host_array(candidate_factory(sets, inputs, "cpu")()())
    assert result_mismatch(got, case) is None
    assert np.abs(got - reference).max() < 1e-4 * np.abs(reference).max()
    no_loops = gat_inputs(*small_graph(), 5, heads=2, hidden=4, classes=7, seed=1)
    with pytest.MonkeyPatch.context() as patch:  # the structure as given, without the self-loop rule
        patch.setattr("sparsetir.bench.bundle.gat.with_self_loops", lambda indptr, indices, loops: (indptr, indices))
        wrong = host_array(candidate_factory(sets, no_loops, "cpu")()())
    assert result_mismatch(wrong, case) is not None


@pytest.mark.slow  # the runner in its own process: imports, the reference, every contender checked and timed
def test_the_runner_checks_and_times_the_gat_step_with_the_runtime_only(bundle, tmp_path):
    run = run_bundle(bundle, tmp_path / "out")
    assert run.returncode == 0, run.stderr + run.stdout
    status = json.loads((tmp_path / "out" / "run.json").read_text())
    assert status["tvm_compiler_loaded"] is False and "records/gat/cora.json" in status["files"]
    records = {r["contender"]: r for r in read_records([tmp_path / "out" / "records" / "gat" / "cora.json"])}
    assert records["sparsetir"]["status"] == "ok", records["sparsetir"]["reason"]
    assert records["pyg-gatconv"]["status"] == "ok", records["pyg-gatconv"]["reason"]
    assert records["dgl-gatconv"]["status"] in ("ok", "unavailable")  # DGL's wheel may not import here
    assert records["sparsetir"]["gat"]["kind"] == "sparsetir" and records["sparsetir"]["gat"]["speedup_vs_best"] > 0
    assert all(r["experiment"] == "gat" and r["provenance"]["runtime_only"] for r in records.values())


def test_bad_gat_bundle_settings_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown gat baseline 'mkl'"):
        build_bundle(tmp_path / "b", ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False,
                     gat={"datasets": ["cora"], "baselines": ["mkl"]})
    with pytest.raises(ValueError, match="heads must be a positive int"):
        build_bundle(tmp_path / "b", ["cora"], [8], target="llvm", limit=1, wheel=False, progress=False,
                     gat={"datasets": ["cora"], "heads": 0})
    assert not (tmp_path / "b").exists()


@pytest.mark.slow  # nvcc: a dozen seconds per kernel (one set: heads 1 and 7 features serve both layers)
def test_cuda_gat_sets_carry_device_code_and_compute_the_step_on_the_emulator(tmp_path):
    from cuda_kernels import emulated_edge_softmax_set

    from sparsetir.backend.cuda import nvcc_available
    from sparsetir.backend.fatbin import fatbin_entries

    if not nvcc_available()[0]:
        pytest.skip("nvcc is not installed")
    manifest = build_bundle(tmp_path / "b", ["cora"], [32], limit=1, wheel=False, progress=False,
                            gat={"datasets": ["cora"], "heads": 1, "hidden": 7})
    section = manifest["gat"]
    assert section["baselines"] == ["pyg-gatconv"]  # DGL has no GPU build: not listed for cuda
    assert section["cases"][0]["layers"] == ["h1f7", "h1f7"] and list(section["kernel_sets"]) == ["h1f7"]
    loaded = load_kernel_set(tmp_path / "b", section, "h1f7", tmp_path, assemble_kernel)
    assert loaded.device == "cuda"
    for function in loaded.values():
        assert ("ELF", "sm_90") in {(e.kind, e.arch) for e in fatbin_entries(function.library)}
    emulated = emulated_edge_softmax_set(loaded)
    inputs = gat_inputs(*small_graph(n=7, seed=5), 3, heads=1, hidden=7, classes=7, seed=2)
    reference, tolerance = gat_reference(inputs)
    got = host_array(candidate_factory([emulated, emulated], inputs, "cpu")()())
    assert result_mismatch(got, Case((inputs.X,), reference, tolerance, 0)) is None
