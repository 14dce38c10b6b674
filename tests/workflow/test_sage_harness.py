"""The sage experiment's tables and config checks: speedups over the best of PyG and DGL, geometric means
against the targets, accuracy against PyG's standard deviation, and bad settings refused before any job."""

from __future__ import annotations

import copy

import pytest
import yaml
from workflow_runner import CONFIGS

from sparsetir.bench.families.sage import FAMILY
from sparsetir.bench.report.families.sage import markdown, summary_frame, target_lines

check_sage_config = FAMILY.check_config
DEFAULT = yaml.safe_load((CONFIGS / "default.yaml").read_text())["sage"]


def _record(contender, ms, acc, seed=0, dataset="cora", mode="full", status="ok", reason=None):
    return {"mode": mode, "dataset": dataset, "contender": contender, "seed": seed, "status": status, "reason": reason,
            "labelled": True, "nodes": 10, "edges": 20, "median_ms": ms, "mean_ms": ms, "compile_s": 0.1,
            "kernel_compile_s": 0.05 if contender.startswith("sparsetir") else None, "test_acc": acc,
            "provenance": {"loadavg": [1.0, 1.0, 1.0]}}


def test_speedups_are_over_the_fastest_baseline_and_accuracy_is_checked_against_pyg_std():
    records = [_record("sparsetir", 50.0 + seed, 0.80 + 0.01 * seed, seed) for seed in range(3)]
    records += [_record("pyg-csr", 100.0, 0.79 + 0.02 * seed, seed) for seed in range(3)]
    records += [_record("dgl", 80.0, 0.8, seed) for seed in range(3)]
    records += [_record("pyg-EdgeIndex", None, None, seed, status="failed", reason="epoch 0: boom") for seed in range(3)]
    table = summary_frame(records).set_index("contender")
    assert table.loc["sparsetir", "best_baseline"] == "dgl"
    assert table.loc["sparsetir", "speedup_vs_best_baseline"] == pytest.approx(80.0 / 51.0)
    assert table.loc["sparsetir", "test_acc_std"] == pytest.approx(0.01)
    assert table.loc["sparsetir", "acc_within_pyg_std"]  # |0.81 - 0.81| <= 0.02
    assert table.loc["pyg-EdgeIndex", "status"] == "failed"
    lines = target_lines(summary_frame(records), {"full": 1.5})
    assert any("sparsetir: geometric mean 1.57x" in line and "target 1.5x: met" in line for line in lines)
    text = markdown(summary_frame(records), {"full": 1.5})
    assert "## Not run" in text and "epoch 0: boom" in text


def test_one_seed_says_there_is_no_standard_deviation_to_compare():
    table = summary_frame([_record("sparsetir", 10.0, 0.8), _record("pyg-csr", 20.0, 0.8)])
    assert table.set_index("contender").loc["sparsetir", "acc_within_pyg_std"] is None
    assert any("one seed per graph" in line for line in target_lines(table, {"full": 1.5}))


@pytest.mark.parametrize("change,message", [
    (lambda s: s["full"].update(datasets=["no-such-graph"]), "unknown dataset 'no-such-graph'"),
    (lambda s: s["full"].update(epochs=2, warmup=2), r"epochs \(2\) must exceed warmup \(2\)"),
    (lambda s: s["minibatch"].update(fanouts=[10, 10]), "one fan-out per layer"),
    (lambda s: s["minibatch"].update(fanouts=[10, 0, 10]), "a fan-out must be positive"),
    (lambda s: s["sparsetir"].update({"sparsetir-x": {"colour": 1}}), "unknown options"),
])
def test_bad_sage_settings_are_refused_before_any_job(change, message):
    settings = copy.deepcopy(DEFAULT)
    change(settings)
    with pytest.raises(ValueError, match=message):
        check_sage_config(settings)


def test_every_config_that_runs_sage_passes_the_checks():
    for name in ("default.yaml", "smoke.yaml", "full.yaml"):
        check_sage_config(yaml.safe_load((CONFIGS / name).read_text())["sage"])


def test_the_epoch_split_is_a_section_of_the_table_with_the_mean_over_seeds():
    records = [_record("sparsetir", 50.0, 0.8, seed) | {"epoch_split": {"sparse": 0.1 + 0.1 * seed, "dense": 0.5,
                                                                         "rest": 0.4 - 0.1 * seed}} for seed in range(2)]
    records += [_record("dgl", 80.0, 0.8), _record("pyg-csr", 90.0, 0.8)]  # older records: no split
    table = summary_frame(records).set_index("contender")
    assert table.loc["sparsetir", "sparse_share"] == pytest.approx(0.15)
    assert table.loc["sparsetir", "rest_share"] == pytest.approx(0.35)
    text = markdown(summary_frame(records), {"full": 1.5})
    section = text.split("## Epoch split")[1]
    assert "15%" in section and "50%" in section and "35%" in section and "--" in section  # dgl has none
