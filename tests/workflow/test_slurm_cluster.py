"""The shipped SLURM profile runs the smoke config's rgcn target on a real single-node SLURM cluster.

The module brings up SLURM on localhost with the configuration workflows/README.md "Running on a cluster"
gives (workflows/scripts/slurm_localhost.py: Debian's slurm-wlm 22.05 and munge, installed with apt when
absent; the module skips, saying why, when they cannot be). It runs ``snakemake rgcn --profile
profiles/slurm`` with only the documented overrides and compares it with the session's local smoke run
(the same config; conftest.py's ``smoke_run``): the records have the local run's shape, every job SLURM
ran got as many CPUs as it ran threads, the tables, figures and summary never went to SLURM, and the
pre-flight refuses a request no node can run before submitting anything. Every daemon it started is
stopped at the end.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import slurm_localhost
import yaml
from workflow_runner import CONFIGS, REPO_ROOT, run_snakemake

pytestmark = pytest.mark.slow  # SLURM up and the target through it: about two minutes (the local run is the smoke run's)

SMOKE = str(CONFIGS / "smoke.yaml")
PROFILE = str(REPO_ROOT / "profiles" / "slurm")
RGCN = Path("results") / "smoke" / "rgcn"
#: the documented override for a quick run: the first status check after 5 s instead of 40 s
QUICK = ("--slurm-init-seconds-before-status-checks", "5")
HANG_S = 1200  # only catches a hang (a finished job the plugin never notices)
#: the timed rules this target can run (training_run only where the smoke config has rgcn.training);
#: rgcn_memory measures memory with one thread
TIMED_RULES = {"rgcn_case", "training_run"}


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running one-node cluster (its state folder); every daemon is stopped afterwards."""
    if os.geteuid() != 0:
        pytest.skip("a SLURM cluster on localhost needs root (slurmd launches the jobs)")
    if reason := slurm_localhost.install_packages():
        pytest.skip(f"SLURM could not be installed: {reason}")
    system_conf = slurm_localhost.SYSTEM_CONF
    if system_conf.exists() and not system_conf.read_text().startswith(slurm_localhost.MARKER):
        pytest.skip(f"{system_conf} exists: this machine has its own SLURM, which the test will not replace")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("the profile's timed jobs ask for 2 CPUs; this machine has one")
    folder = tmp_path_factory.mktemp("slurm")
    slurm_localhost.up(folder)
    try:
        yield folder
    finally:
        stopped = slurm_localhost.down(folder)
        assert set(stopped) == set(slurm_localhost.DAEMONS), stopped
        assert not list(folder.glob("*.started")) and not system_conf.exists()


def _jobs_of(log: str) -> dict[str, dict]:
    """SLURM's view of this run's jobs (squeue keeps finished ones for MinJobAge): id -> state, CPUs, rule, output."""
    run_uuid = re.search(r"SLURM run ID: (\S+)", log).group(1)
    outputs = {jobid: (rule, output.split(",")[0]) for rule, output, jobid in
               re.findall(r"rule (\w+):\n(?:    (?!output:).*\n)*    output: (.*)\n(?:    (?!jobid:).*\n)*    jobid: (\d+)",
                          log)}
    submitted = dict((slurm_id, job) for job, slurm_id in re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)",
                                                                     log))
    table = subprocess.run(["squeue", "--states=all", "--noheader", "--name", run_uuid, "--format=%i|%T|%C"],
                           capture_output=True, text=True, check=True, timeout=60).stdout
    jobs = {}
    for line in table.splitlines():
        slurm_id, state, cpus = line.split("|")
        rule, output = outputs[submitted[slurm_id]]
        jobs[slurm_id] = {"state": state, "cpus": int(cpus), "rule": rule, "output": output}
    return jobs


def _threads(record: dict) -> set[int]:
    """Every thread count a record's provenance states (a row that timed nothing states none)."""
    provenance = record["provenance"]
    counts = {provenance.get("threads"), provenance.get("torch_threads"),
              provenance.get("env", {}).get("OMP_NUM_THREADS") if "torch_threads" in provenance else None}
    return {int(count) for count in counts if count is not None}


@pytest.fixture(scope="module")
def runs(slurm, smoke_run, tmp_path_factory):
    """(SLURM workdir, its log, local workdir): the rgcn target through SLURM, and the session's local smoke run
    (conftest.py's ``smoke_run``: the same config, every target, so its rgcn folder is the local run's)."""
    on_slurm = tmp_path_factory.mktemp("on-slurm")
    result = run_snakemake(on_slurm, "rgcn", "--profile", PROFILE, "--configfile", SMOKE, *QUICK, timeout=HANG_S)
    assert result.returncode == 0, result.stdout[-6000:]
    return on_slurm, result.stdout, smoke_run[0]


def _shape(records: list[dict]) -> list[tuple]:
    """What a records file holds, without the measurements: per record its keys, contender and status."""
    return sorted((tuple(sorted(record)), record["contender"], record["status"]) for record in records)


def test_the_records_have_the_shape_of_a_local_run(runs):
    on_slurm, _, local = runs
    files = sorted(path.relative_to(local) for path in (local / RGCN).rglob("*") if path.is_file())
    assert files and files == sorted(path.relative_to(on_slurm) for path in (on_slurm / RGCN).rglob("*")
                                     if path.is_file())
    for path in files:
        if path.suffix == ".json" and path.parent.name in ("records", "timed"):
            assert _shape(json.loads((on_slurm / path).read_text())) == _shape(json.loads((local / path).read_text()))
    tables = [pd.read_csv(workdir / RGCN / "speedup.csv") for workdir in (on_slurm, local)]
    assert list(tables[0].columns) == list(tables[1].columns)
    key = [column for column in ("dataset", "contender", "status") if column in tables[1].columns]
    assert key and tables[0][key].sort_values(key).values.tolist() == tables[1][key].sort_values(key).values.tolist()


def test_every_job_slurm_ran_got_as_many_cpus_as_it_ran_threads(runs):
    on_slurm, log, _ = runs
    jobs = _jobs_of(log)
    assert jobs and all(job["state"] == "COMPLETED" for job in jobs.values()), jobs
    training = "training" in (yaml.safe_load(Path(SMOKE).read_text()).get("rgcn") or {})
    expected = {"rgcn_case", "rgcn_memory"} | ({"training_run"} if training else set())
    assert {job["rule"] for job in jobs.values()} == expected  # tables, figures: local
    timed = 0
    for job in jobs.values():
        if job["rule"] in TIMED_RULES:
            threads = set().union(*(_threads(record) for record in json.loads((on_slurm / job["output"]).read_text())))
            assert threads in (set(), {job["cpus"]}) and job["cpus"] == 2, (job, threads)  # the max-threads
            timed += bool(threads)
        else:
            assert job["cpus"] == 1, job
    assert timed >= 1 + training  # the R-GCN inference case (and the training run, where the config has it)
    fits = re.search(r"SLURM pre-flight: 1 node\(s\); every job fits: (.*)", log).group(1)
    assert "rgcn_case (2 CPUs, 4000 MB)" in fits and "rgcn_memory (1 CPU, 2000 MB)" in fits, fits


def test_the_pre_flight_refuses_what_no_node_can_run_and_submits_nothing(slurm, tmp_path):
    result = run_snakemake(tmp_path, "rgcn", "--profile", PROFILE, "--configfile", SMOKE, *QUICK,
                           "--max-threads", "512", "--slurm-status-command", "sacct", timeout=HANG_S)
    assert result.returncode != 0
    assert "SLURM pre-flight refused the run (nothing was submitted)" in result.stdout, result.stdout[-4000:]
    assert "rule rgcn_case: asks for 512 CPUs" in result.stdout
    assert "SLURM job accounting is off (AccountingStorageType=accounting_storage/none)" in result.stdout
    assert "has been submitted with SLURM jobid" not in result.stdout
