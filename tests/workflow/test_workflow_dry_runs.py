"""Every target, config and cluster profile plans without error; bad configs fail clearly."""

from __future__ import annotations

import re

import pytest
import yaml
from harness_config import FAMILIES, pending_families, workflow_families
from workflow_runner import CONFIGS, REPO_ROOT, run_snakemake

TARGETS = ["all", "spmm", "sddmm", "attention", "conv", "rgcn", "sage", "gat"]
# Families whose declaration has a workflow and which the default config configures run; the others are pending.
PENDING = pending_families(yaml.safe_load((CONFIGS / "default.yaml").read_text()), workflow_families())


@pytest.mark.parametrize("target", TARGETS)
def test_dry_run_of_every_target(tmp_path, target):
    result = run_snakemake(tmp_path, "-n", "--cores", "2", target)
    assert result.returncode == 0, result.stdout
    assert "This was a dry-run" in result.stdout
    if target in ("spmm", "sddmm"):
        assert f"results/{target}/records/pubmed/feat128.json" in result.stdout
        assert "prepare_dataset" in result.stdout and "speedup_figures" in result.stdout
    if target in FAMILIES:
        assert "run_case" not in result.stdout
        assert ("pending_experiment" in result.stdout) == (target in PENDING), result.stdout[-3000:]


@pytest.mark.parametrize("config", ["smoke.yaml", "gpu.yaml", "default.yaml"])
def test_dry_run_of_every_config(tmp_path, config):
    result = run_snakemake(tmp_path, "-n", "--cores", "2", "--configfile", str(CONFIGS / config))
    assert result.returncode == 0, result.stdout


def test_gpu_cases_declare_a_gpu(tmp_path):
    result = run_snakemake(tmp_path, "spmm", "-n", "--cores", "2", "--configfile", str(CONFIGS / "gpu.yaml"))
    assert result.returncode == 0, result.stdout
    assert "gpu=1" in result.stdout


@pytest.mark.slow
def test_gpu_bundle_and_ingest_plan(tmp_path):
    result = run_snakemake(tmp_path, "-n", "gpu_bundle")
    assert result.returncode == 0 and "results/gpu-bundle" in result.stdout, result.stdout
    result = run_snakemake(tmp_path, "-n", "gpu_ingest")
    assert result.returncode != 0 and "gpu_ingest --config bundle_records=<folder>" in result.stdout
    (tmp_path / "records").mkdir()
    result = run_snakemake(tmp_path, "-n", "gpu_ingest", "--config", f"bundle_records={tmp_path / 'records'}")
    assert result.returncode == 0 and "results/gpu-ingest/summary.json" in result.stdout, result.stdout


def test_dry_run_with_the_slurm_profile(tmp_path):
    result = run_snakemake(tmp_path, "-n", "--profile", str(REPO_ROOT / "profiles" / "slurm"))
    assert result.returncode == 0, result.stdout
    assert "run_case" in result.stdout


def _config_with(tmp_path, change):
    config = yaml.safe_load((CONFIGS / "smoke.yaml").read_text())
    change(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("change,message", [
    (lambda c: c.update(colour="blue"), "Additional properties are not allowed.*colour"),
    (lambda c: c.update(feats=[0]), "0 is less than the minimum of 1"),
    (lambda c: c.update(device="tpu"), "'tpu' is not one of"),
    (lambda c: c["experiments"]["spmm"].update(baselines=["mkl"]), "'mkl' is not one of"),
    (lambda c: c.update(datasets=["no-such-graph"]), "unknown dataset 'no-such-graph'"),
    (lambda c: c.update(datasets=["rmat:99:1"]), "generator spec 'rmat:99:1': arguments out of range"),
    (lambda c: c["hyb"].update(cora={"col_parts": 1, "buckets": [4, 2]}), "strictly increasing"),
    (lambda c: c["experiments"]["spmm"].update(reference={"cpu": "best-cpu-library", "cuda": "best-cpu-library"}),
     "applies to the CPU only"),
    (lambda c: c["experiments"]["spmm"].update(cpu_libraries=["mkl"]), "'mkl' is not one of"),
    (lambda c: c["tuning"].update(budget_s={"sddmm": 1}), "'tuned' contender but tuning.budget_s.spmm is not set"),
    (lambda c: c["tuning"]["budget_s"].update(spmm=0), "0 is less than or equal to the minimum of 0"),
])
def test_bad_config_is_a_clear_error(tmp_path, change, message):
    result = run_snakemake(tmp_path, "-n", "--configfile", str(_config_with(tmp_path, change)))
    assert result.returncode != 0
    assert re.search(message, result.stdout, re.S), result.stdout[-3000:]


def test_the_snakefile_stays_thin():
    lines = [line for line in (REPO_ROOT / "Snakefile").read_text().splitlines() if line.strip()]
    assert len(lines) < 40  # the rules live in workflows/rules/*.smk
    assert sum("include:" in line for line in lines) == 9  # the rule files, the families, training, the targets


def test_config_overrides_apply_on_top_of_the_default(tmp_path):
    result = run_snakemake(tmp_path, "spmm", "-n", "--config", "results=elsewhere")
    assert result.returncode == 0, result.stdout
    assert "elsewhere/spmm/records/cora/feat32.json" in result.stdout
