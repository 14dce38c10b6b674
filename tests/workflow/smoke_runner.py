"""The smoke workflow's one killed-and-resumed run, shared by the tests that read its results
(test_smoke_workflow.py, and test_slurm_cluster.py as its local run of the rgcn target): conftest.py's
session fixture ``smoke_run`` runs it once."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from workflow_runner import CONFIGS, REPO_ROOT, run_snakemake, snakemake_command

SMOKE = str(CONFIGS / "smoke.yaml")
RESULTS = Path("results") / "smoke"  # results: auto gives the smoke config its own folder
#: Only catches a hang: the smoke run takes about two minutes on an idle 2-core machine, and many
#: times that on a busy one, so no bound here is a speed limit (speed is measured in benchmarks).
HANG_S = 1800


def finished_records(workdir: Path) -> dict[Path, tuple[int, bytes]]:
    return {path: (path.stat().st_mtime_ns, path.read_bytes())
            for path in (workdir / RESULTS).glob("*/records/*/feat*.json")}


def completed_case_outputs(log: str) -> set[str]:
    """Outputs of the run_case jobs that snakemake's log reports as finished."""
    outputs = dict(re.findall(r"rule run_case:\n(?:\s+\w+: .*\n)*?\s+output: (\S+)\n(?:\s+log: .*\n)?\s+jobid: (\d+)",
                              log))
    by_job = {job: output for output, job in outputs.items()}
    return {by_job[job] for job in re.findall(r"Finished jobid: (\d+)", log) if job in by_job}


def run_killed_and_resumed(tmp_path_factory):
    """Run, kill after the first finished case, resume; return (workdir, kept records, resumed log)."""
    workdir = tmp_path_factory.mktemp("smoke")
    log_path = workdir.parent / f"{workdir.name}-killed-run.log"
    started = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(snakemake_command(workdir, "--cores", "2", "--configfile", SMOKE), cwd=REPO_ROOT,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while not (completed := completed_case_outputs(log_path.read_text())):
            assert process.poll() is None, "the smoke run ended before any case finished"
            assert time.monotonic() - started < HANG_S, f"no case finished within {HANG_S} s: the run hangs"
            time.sleep(0.1)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    kept = {path: state for path, state in finished_records(workdir).items()
            if str(path.relative_to(workdir)) in completed}
    assert kept
    assert not (workdir / RESULTS / "spmm" / "speedup.csv").exists(), "killed too late to test a resume"

    assert run_snakemake(workdir, "--unlock", "--cores", "1", "--configfile", SMOKE).returncode == 0
    resumed = run_snakemake(workdir, "--cores", "2", "--configfile", SMOKE, "--rerun-incomplete", timeout=HANG_S)
    assert resumed.returncode == 0, resumed.stdout[-5000:]
    return workdir, kept, resumed.stdout
