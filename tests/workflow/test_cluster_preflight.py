"""The SLURM pre-flight refuses what no node could ever run, and a status query that could never see a job
finish; the shipped profiles give every submitted rule its resources and every timed job CPUs = threads."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import yaml
from cluster_preflight import (
    Node,
    Request,
    check_slurm,
    parse_scontrol_config,
    parse_sinfo,
    requests_from_jobs,
    status_problem,
    unfit,
)
from workflow_runner import CONFIGS, REPO_ROOT, loaded_rules, run_snakemake

SINFO = """\
small|debug*|2|3900|(null)
big|debug*|16|64000|(null)
big|long|16|64000|(null)
g1|gpu|8|32000|gpu:a100:2(S:0-1)
"""
CONFIG = """\
Configuration data as of 2026-12-02T04:30:00
AccountingStorageType   = accounting_storage/none
MinJobAge               = 300 sec
SlurmctldPort           = 6817
"""
#: the rules that time something (threads = the CPUs they are granted) and the others that are submitted
TIMED_RULES = {"run_case", "tune_case", "rgcn_case", "conv_case", "sage_train", "training_run", "attention_case",
               "attention_prunedbert", "copy_bandwidth"}
SUBMITTED_RULES = TIMED_RULES | {"rgcn_memory", "prepare_dataset", "gpu_bundle"}


def test_sinfo_gives_every_node_of_every_partition_and_the_default():
    nodes, default = parse_sinfo(SINFO)
    assert default == "debug"
    assert Node("g1", "gpu", 8, 32000, "gpu:a100:2(S:0-1)") in nodes
    assert [node.partition for node in nodes].count("debug") == 2
    with pytest.raises(ValueError, match="unexpected sinfo line"):
        parse_sinfo("a|b|c\n")


def test_a_request_that_fits_one_node_passes():
    nodes, default = parse_sinfo(SINFO)
    assert unfit([Request("run_case", 16, 64000), Request("run_case", 2, 2000, "long"),
                  Request("run_case", 8, 8000, "gpu", gpus=2)], nodes, default) == []


@pytest.mark.parametrize("request_,message", [
    (Request("run_case", 32, 4000), r"run_case: asks for 32 CPUs, 4000 MB, but no node of partition 'debug'"),
    (Request("run_case", 2, 128000), r"128000 MB.*the largest: big, 16 CPUs, 64000 MB"),
    (Request("run_case", 2, 1000, "cpu"), r"partition 'cpu' does not exist \(sinfo lists debug, gpu, long\)"),
    (Request("run_case", 2, 1000, gpus=1), r"1 GPU\(s\), but no node of partition 'debug'"),
    (Request("run_case", 1, 1000, "gpu", gpus=4), r"4 GPU\(s\)"),
    (Request("run_case", 1, None, threads=2), r"cpus_per_task=1 but threads=2"),
])
def test_a_request_no_node_can_run_is_named(request_, message):
    nodes, default = parse_sinfo(SINFO)
    problems = unfit([request_], nodes, default)
    assert len(problems) == 1 and re.search(message, problems[0]), problems


def test_without_a_default_partition_a_request_must_name_one():
    nodes, _ = parse_sinfo(SINFO.replace("debug*", "debug"))
    assert "names no partition and the cluster has no default one" in unfit([Request("x", 1)], nodes, None)[0]


def test_squeue_status_works_without_accounting_when_min_job_age_is_long_enough():
    settings = parse_scontrol_config(CONFIG)
    assert settings["MinJobAge"] == "300 sec"
    assert status_problem(settings, status_command="squeue", init_seconds=40, sacct_available=True) is None
    assert status_problem(settings, status_command="squeue", init_seconds=40, sacct_available=False) is None


@pytest.mark.parametrize("config,command,init,sacct,message", [
    (CONFIG, "sacct", 40, True, "accounting is off .* and the status command is sacct"),
    (CONFIG, None, 40, True, "accounting is off"),  # the plugin's own default is sacct where it exists
    (CONFIG.replace("300 sec", "60 sec"), "squeue", 40, True, "MinJobAge is 60 sec, so the plugin queries sacct"),
    (CONFIG.replace("300 sec", "60 sec"), "squeue", 40, False, "squeue forgets a finished job"),
    (CONFIG, "squeue", 120, True, "MinJobAge of at least 360 s"),
])
def test_a_status_query_that_never_sees_a_job_finish_is_refused(config, command, init, sacct, message):
    problem = status_problem(parse_scontrol_config(config), status_command=command, init_seconds=init,
                             sacct_available=sacct)
    assert problem and re.search(message, problem), problem
    accounting = parse_scontrol_config(config.replace("accounting_storage/none", "accounting_storage/slurmdbd"))
    if sacct:  # with slurmdbd, sacct sees every job
        assert status_problem(accounting, status_command=command, init_seconds=init, sacct_available=True) is None


def test_check_slurm_names_every_problem_in_one_error():
    answers = {"sinfo": SINFO, "scontrol": CONFIG}
    run = lambda command: answers[command[0]]  # noqa: E731 - a fake of sinfo and scontrol
    assert check_slurm([Request("run_case", 2, 4000)], status_command="squeue", init_seconds=40, run=run,
                       sacct_available=True)
    with pytest.raises(ValueError, match=r"(?s)refused the run \(nothing was submitted\).*32 CPUs.*accounting is off"):
        check_slurm([Request("run_case", 32, 4000)], status_command="sacct", init_seconds=40, run=run,
                    sacct_available=True)


def _job(rule, threads, local=False, **resources):
    return SimpleNamespace(rule=SimpleNamespace(name=rule), threads=threads, resources=resources, is_local=local)


def test_requests_are_what_the_plugin_asks_sbatch_for():
    jobs = [_job("run_case", 2, mem_mb_per_cpu=2000), _job("run_case", 2, mem_mb_per_cpu=2000),
            _job("speedup_tables", 1, local=True, mem_mb=1000), _job("prepare_dataset", 1, mem_mb=1000),
            _job("tune_case", 4, cpus_per_task=1, slurm_partition="long"), _job("run_case", 1, gpu=1, mem_mb=500)]
    assert requests_from_jobs(jobs, lambda job: job.is_local) == [
        Request("run_case", 2, 4000), Request("prepare_dataset", 1, 1000),
        Request("tune_case", 1, None, "long", threads=4), Request("run_case", 1, 500, gpus=1)]


@pytest.mark.parametrize("profile", ["slurm", "kubernetes"])
def test_the_profiles_size_every_submitted_rule_and_never_set_cpus_per_task(profile):
    settings = yaml.safe_load((REPO_ROOT / "profiles" / profile / "config.yaml").read_text())
    assert isinstance(settings["max-threads"], int) and settings["max-threads"] >= 1  # a timed job's CPUs
    assert set(settings["set-resources"]) == SUBMITTED_RULES
    assert "set-threads" not in settings and "default-resources" not in settings  # overrides replace nothing
    for resources in settings["set-resources"].values():
        assert "cpus_per_task" not in resources and "runtime" in resources
    if profile == "slurm":
        assert settings["slurm-status-command"] == "squeue"  # works without job accounting


@pytest.fixture(scope="module")
def rules():
    """The loaded workflow's rules (the registry's families' included), planned with 7 cores."""
    return loaded_rules(7)


def test_no_rule_reads_workflow_cores_and_every_timed_rule_takes_the_timed_threads(rules):
    sources = {path: re.sub(r"#.*", "", path.read_text())  # the code, without its comments
               for path in (REPO_ROOT / "workflows" / "rules").rglob("*.smk")}
    assert not any("workflow.cores" in text for text in sources.values())  # undefined without --cores
    assert {name for name, rule in rules.items() if rule["threads"] == 7} == TIMED_RULES


def test_tables_figures_and_the_report_are_local_rules(rules):
    local = {name for name, rule in rules.items() if rule["local"]}
    assert {"speedup_tables", "speedup_figures", "family_summary", "report", "gpu_ingest",
            "rgcn_tables", "rgcn_figures", "conv_tables", "conv_figures", "sage_tables", "sage_figures",
            "attention_tables", "attention_figures", "training_tables", "training_figures"} <= local
    assert not local & SUBMITTED_RULES
    # the default config configures every family, so the pending step (pending.smk) is not planned
    assert "localrules: pending_experiment" in (REPO_ROOT / "workflows" / "rules" / "pending.smk").read_text()


def test_dry_run_with_the_kubernetes_profile(tmp_path):
    pytest.importorskip("snakemake_executor_plugin_kubernetes",
                        reason="the kubernetes extra is not installed (pip install '.[kubernetes]')")
    pytest.importorskip("snakemake_storage_plugin_fs",
                        reason="no offline storage plugin for the dry run (pip install snakemake-storage-plugin-fs)")
    result = run_snakemake(tmp_path, "spmm", "-n", "--profile", str(REPO_ROOT / "profiles" / "kubernetes"),
                           "--configfile", str(CONFIGS / "smoke.yaml"), "--default-storage-provider", "fs",
                           "--default-storage-prefix", str(tmp_path / "storage"))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "run_case" in result.stdout and "mem_mb=2000" in result.stdout
