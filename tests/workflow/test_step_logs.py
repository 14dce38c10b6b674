"""Every workflow step writes its output to a log under <results>/logs, and a failing step's traceback is there."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from step_log import output_to_log
from workflow_runner import CONFIGS, run_snakemake

SMOKE = str(CONFIGS / "smoke.yaml")


def _rules_without_a_log(lint_output: str) -> list[str]:
    """The rules snakemake's linter reports as "No log directive defined" (rules that run nothing are exempt)."""
    blocks = re.split(r"^Lints for ", lint_output, flags=re.M)
    return sorted(re.match(r"rule (\w+)", block).group(1) for block in blocks
                  if block.startswith("rule ") and "* No log directive defined" in block)


def test_every_rule_that_runs_a_step_declares_a_log(tmp_path):
    result = run_snakemake(tmp_path, "--lint", "--configfile", SMOKE)
    assert "Traceback" not in result.stdout and "Lints for rule" in result.stdout, result.stdout[-3000:]
    assert _rules_without_a_log(result.stdout) == []


def test_the_lint_check_would_catch_a_rule_without_a_log():
    lint = ("Lints for rule speedup_tables (line 5, aggregate.smk):\n"
            "    * Specify a conda environment or container for each rule.:\n"
            "Lints for rule new_step (line 9, new.smk):\n"
            "    * No log directive defined:\n"
            "      Without a log directive, all output will be printed to the terminal.\n")
    assert _rules_without_a_log(lint) == ["new_step"]


def test_every_job_logs_under_its_own_results_folder(tmp_path):
    (tmp_path / "records").mkdir()
    result = run_snakemake(tmp_path, "all", "gpu_bundle", "gpu_ingest", "-n", "--cores", "1", "--configfile", SMOKE,
                           "--config", "results=elsewhere", f"bundle_records={tmp_path / 'records'}")
    assert result.returncode == 0, result.stdout[-3000:]
    jobs = re.findall(r"^rule (\w+):\n((?:    .*\n)+)", result.stdout, flags=re.M)
    steps = {rule: block for rule, block in jobs if "    output: " in block}  # `all` and the targets run nothing
    assert {"prepare_dataset", "tune_case", "run_case", "speedup_tables", "speedup_figures", "gpu_bundle",
            "gpu_ingest"} <= set(steps)  # plus the op families' steps (rules/families.smk), or their pending step
    for rule, block in jobs:
        if rule in steps:
            assert re.search(rf"^    log: elsewhere/logs/{rule}\b\S*\.log$", block, flags=re.M), (rule, block)


@pytest.mark.slow
def test_a_failing_step_keeps_its_traceback_in_its_log_and_snakemake_names_the_log(tmp_path):
    (tmp_path / "empty-records").mkdir()
    result = run_snakemake(tmp_path, "gpu_ingest", "--cores", "1", "--configfile", SMOKE,
                           "--config", f"bundle_records={tmp_path / 'empty-records'}")
    assert result.returncode != 0
    assert "log: results/smoke/logs/gpu_ingest.log (check log file(s) for error details)" in result.stdout, result.stdout
    log = (tmp_path / "results" / "smoke" / "logs" / "gpu_ingest.log").read_text()
    assert "Traceback (most recent call last)" in log and "ValueError: no record files in" in log, log


def test_output_to_log_collects_python_c_level_and_child_process_output(tmp_path, capfd):
    log = tmp_path / "logs" / "step.log"
    with output_to_log(log):
        print("python stdout")
        print("python stderr", file=sys.stderr)
        os.write(2, b"fd 2, as TVM's C++ logging writes\n")
        subprocess.run([sys.executable, "-c", "import sys; print('child stderr', file=sys.stderr)"], check=True)
    print("after the step")
    text = log.read_text()
    for line in ("python stdout", "python stderr", "fd 2, as TVM's C++ logging writes", "child stderr"):
        assert line in text
    assert "after the step" not in text
    assert "after the step" in capfd.readouterr().out


def test_output_to_log_writes_the_traceback_and_raises_again(tmp_path):
    log = tmp_path / "step.log"
    with pytest.raises(ValueError, match="bad records"):
        with output_to_log(log):
            raise ValueError("bad records")
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "ValueError: bad records" in text
