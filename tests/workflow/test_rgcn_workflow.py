"""The rgcn target: it plans a timing job and a memory job per dataset, each with a log, then tables and
a figure; bad rgcn settings stop the run before any job; the tables give ms, speedups, memory and reasons."""

from __future__ import annotations

import copy
import re

import pandas as pd
import pytest
import yaml
from family_case import check_family_config
from workflow_runner import CONFIGS, run_snakemake

from sparsetir.bench.case_runner import unavailable_records
from sparsetir.bench.records import make_record
from sparsetir.bench.report.families.rgcn import (
    inference_figure,
    markdown_report,
    rgcn_frame,
    target_lines,
    write_tables,
)

DEFAULT = yaml.safe_load((CONFIGS / "default.yaml").read_text())


def test_the_rgcn_target_plans_timing_memory_tables_and_a_figure_with_logs(tmp_path):
    result = run_snakemake(tmp_path, "rgcn", "-n", "--cores", "2")
    assert result.returncode == 0, result.stdout[-3000:]
    jobs = re.findall(r"^rule (\w+):\n((?:    .*\n)+)", result.stdout, flags=re.M)
    planned = {}
    for rule, block in jobs:
        planned.setdefault(rule, []).append(block)
    for dataset in DEFAULT["rgcn"]["datasets"]:
        assert f"results/rgcn/timed/{dataset}.json" in result.stdout
        assert f"results/rgcn/records/{dataset}.json" in result.stdout
    assert len(planned["rgcn_case"]) == len(planned["rgcn_memory"]) == len(DEFAULT["rgcn"]["datasets"])
    for rule in ("rgcn_case", "rgcn_memory", "rgcn_tables", "rgcn_figures"):
        for block in planned[rule]:
            assert re.search(rf"^    log: results/logs/{rule}\b\S*\.log$", block, flags=re.M), (rule, block)
    assert "results/rgcn/figures/rgcn_inference.png" in result.stdout and "pending_experiment" not in result.stdout


def test_the_full_config_adds_the_download_only_graphs_and_a_tuned_contender():
    full = yaml.safe_load((CONFIGS / "full.yaml").read_text())["rgcn"]
    assert full["datasets"] == ["aifb", "mutag", "bgs", "am", "ogbl-biokg"]
    assert "auto" in full["sparsetir"].values() and full["dims"] == [32, 32, 32]
    assert DEFAULT["rgcn"]["datasets"] == ["aifb", "mutag"] and DEFAULT["rgcn"]["dims"] == [32, 32, 32]


def test_the_schema_lists_exactly_the_declared_variants_and_their_libraries():
    import json

    from harness_config import derived_schema

    import baselines

    schema = json.loads(derived_schema(CONFIGS / "schema.yaml").read_text())
    enum = schema["properties"]["rgcn"]["properties"]["baselines"]["items"]["enum"]
    assert set(enum) == set(baselines.variants("rgcn")) | set(baselines.libraries_of("rgcn"))


@pytest.mark.parametrize("change,message", [
    (lambda s: s.update(datasets=["cora"]), "config rgcn.datasets: unknown relational graph 'cora'"),
    (lambda s: s.update(datasets=["relational:0:1:1"]), "config rgcn.datasets: .*nodes must lie in"),
    (lambda s: s.update(dims=[32, 32]), "config rgcn.dims: dims must be three positive ints"),
    (lambda s: s.update(sparsetir={}, baselines=[]), "no contenders"),
    (lambda s: s.update(sparsetir={"sparsetir-x": "nosuch"}), "config rgcn.sparsetir.sparsetir-x: .*nosuch"),
])
def test_bad_rgcn_settings_are_refused_before_any_job(change, message):
    settings = copy.deepcopy(DEFAULT["rgcn"])
    change(settings)
    with pytest.raises(ValueError, match=message):
        check_family_config("rgcn", settings)


def test_a_bad_rgcn_baseline_stops_the_run_with_the_schema_message(tmp_path):
    config = copy.deepcopy(DEFAULT)
    config["rgcn"]["baselines"] = ["graphiler", "mkl-rgcn"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "rgcn", "-n", "--configfile", str(path), "--config", "results=results")
    assert result.returncode != 0 and "'mkl-rgcn' is not one of" in result.stdout, result.stdout[-3000:]


def _record(dataset, contender, ms, peak_mib, kind, **extra):
    stats = {"median": ms / 1e3, "p20": ms / 1e3, "p80": ms / 1e3, "mean": ms / 1e3, "min": ms / 1e3, "n": 1,
             "samples": [ms / 1e3]}
    record = make_record(experiment="rgcn", op="rgcn", device="cpu", dataset=dataset, feat=32, contender=contender,
                         status="ok", stats=stats, shape=(100, 100), nnz=500, provenance={},
                         times={"convert_s": 0.01, "compile_s": 0.5 if kind == "sparsetir" else None})
    record["rgcn"] = {"dims": [32, 32, 32], "num_relations": 4, "seed": 0, "kind": kind, "speedup_vs_best": None}
    record["memory"] = {"peak_bytes": int(peak_mib * 2**20), "prepare_peak_bytes": 0, "resident_bytes": 0}
    record.update(extra)
    return record


@pytest.fixture
def records():
    found = [_record("aifb", "sparsetir", 10.0, 20.0, "sparsetir"), _record("aifb", "dgl-relgraphconv", 50.0, 30.0,
                                                                          "baseline"),
             _record("aifb", "torch-relation-loop", 80.0, 10.0, "baseline"),
             _record("mutag", "sparsetir", 30.0, 40.0, "sparsetir"),
             _record("mutag", "dgl-relgraphconv", 60.0, 35.0, "baseline"),
             make_record(experiment="rgcn", op="rgcn", device="cpu", dataset="aifb", feat=32, contender="graphiler",
                         status="unavailable", reason="unavailable: Graphiler has no wheel", provenance={})]
    found[-1]["rgcn"] = {"dims": [32, 32, 32], "kind": "baseline"}
    return found + unavailable_records(experiment="rgcn", op="rgcn", dataset="bgs", feats=[32],
                                       reason="no route has bgs")


def test_tables_give_speedups_over_the_best_baseline_memory_and_reasons(records, tmp_path):
    frame = write_tables(records, tmp_path / "s.csv", tmp_path / "s.md", tmp_path / "s.tex", ["aifb", "mutag", "bgs"])
    ours = frame[frame["contender"] == "sparsetir"].set_index("dataset")
    assert ours.loc["aifb", "best_baseline"] == "dgl-relgraphconv"
    assert ours.loc["aifb", "speedup_vs_best_baseline"] == pytest.approx(5.0)
    assert ours.loc["mutag", "speedup_vs_best_baseline"] == pytest.approx(2.0)
    assert ours.loc["aifb", "peak_mib"] == pytest.approx(20.0)
    assert set(pd.read_csv(tmp_path / "s.csv").columns) >= {"median_ms", "peak_mib", "convert_ms", "compile_s", "tune_s"}
    text = (tmp_path / "s.md").read_text()
    for part in ("## ms per inference (median)", "## Peak memory (MiB)", "## Did not run", "Graphiler has no wheel",
                 "no route has bgs", "| geomean"):
        assert part in text, part
    assert "\\begin{tabular}" in (tmp_path / "s.tex").read_text()


def test_the_targets_are_judged_on_the_geomean_the_lowest_speedup_and_memory(records):
    lines = target_lines(rgcn_frame(records))
    assert "geomean 3.16x" in lines[0] and "lowest 2.00x" in lines[0] and "target >= 4x geomean" in lines[0]
    assert lines[0].endswith(": not met.")  # 3.16x against the dense-tiles issue's 4x
    assert any("aifb: peak memory 20.0 MiB against 30.0 MiB" in line and "no higher" in line for line in lines)
    assert any("mutag: peak memory 40.0 MiB against 35.0 MiB" in line and ": higher" in line for line in lines)
    assert "## Targets" in markdown_report(rgcn_frame(records))


def test_the_figure_is_a_png_even_when_nothing_was_timed(records, tmp_path):
    inference_figure(rgcn_frame(records), tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    inference_figure(rgcn_frame(records[-1:]), tmp_path / "b.png")
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
