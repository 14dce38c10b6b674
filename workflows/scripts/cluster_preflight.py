"""Pre-flight of a SLURM run (``--profile profiles/slurm``): refuse before submitting what could never run.

Before any job is submitted (the workflow's ``onstart``), every job that would go to SLURM is compared
with what ``sinfo`` reports for its partition (the cluster's default partition where the job names none):

- its CPUs (``cpus_per_task`` where set, else its threads: the plugin asks ``--cpus-per-task=threads``)
  and its memory (``mem_mb``, or ``mem_mb_per_cpu`` times its CPUs) must fit one node of the partition,
  and a GPU job needs a node with a ``gpu`` GRES; a job that fits no node would wait forever (PENDING);
- a job whose ``cpus_per_task`` differs from its threads is refused too: a timed job must run exactly as
  many threads as it has CPUs.

It also checks that the plugin can see jobs finish. Its ``squeue`` status (the profile's
``slurm-status-command``) sees a finished job for ``MinJobAge`` seconds only, and the plugin falls back to
``sacct`` when that is under three times its first status interval; ``sacct`` needs job accounting
(slurmdbd). Without a status query that works the run would hang after the first job.

Every problem is named in one ``ValueError``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: sinfo, one line per (node, partition): name | partition ("*" marks the default) | CPUs | memory MB | GRES
SINFO = ["sinfo", "--Node", "--noheader", "--format=%N|%P|%c|%m|%G"]
NO_ACCOUNTING = "accounting_storage/none"


@dataclass(frozen=True)
class Node:
    """One node of one partition, as sinfo reports it."""

    name: str
    partition: str
    cpus: int
    mem_mb: int
    gres: str = ""


@dataclass(frozen=True)
class Request:
    """What the jobs of one rule ask SLURM for (``partition`` None: the cluster's default partition)."""

    rule: str
    cpus: int
    mem_mb: int | None = None
    partition: str | None = None
    gpus: int = 0
    threads: int | None = None


def parse_sinfo(text: str) -> tuple[list[Node], str | None]:
    """The nodes in ``sinfo --Node --format=%N|%P|%c|%m|%G`` output, and the default partition (or None)."""
    nodes, default = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.strip().split("|")
        if len(fields) != 5:
            raise ValueError(f"unexpected sinfo line {line!r} (expected name|partition|cpus|memory|gres)")
        name, partition, cpus, mem, gres = fields
        if partition.endswith("*"):
            partition = partition[:-1]
            default = partition
        nodes.append(Node(name, partition, int(cpus.rstrip("+")), int(mem.rstrip("+")),
                          "" if gres == "(null)" else gres))
    return nodes, default


def _gpus(gres: str) -> int:
    """The GPUs in a GRES string such as ``gpu:a100:4(S:0-1),shard:8``."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu":
            total += int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return total


def unfit(requests: Iterable[Request], nodes: list[Node], default: str | None) -> list[str]:
    """One line per request no node can ever run, or whose threads differ from its CPUs."""
    problems = []
    partitions = sorted({node.partition for node in nodes})
    for request in requests:
        if request.threads is not None and request.threads != request.cpus:
            problems.append(f"rule {request.rule}: cpus_per_task={request.cpus} but threads={request.threads}; "
                            "a job must run as many threads as it has CPUs (drop cpus_per_task, or set "
                            "--set-threads to match)")
        partition = request.partition or default
        if partition is None:
            problems.append(f"rule {request.rule}: names no partition and the cluster has no default one "
                            f"(partitions: {', '.join(partitions) or 'none'}); "
                            "add --default-resources slurm_partition=<name>")
            continue
        members = [node for node in nodes if node.partition == partition]
        if not members:
            problems.append(f"rule {request.rule}: partition {partition!r} does not exist "
                            f"(sinfo lists {', '.join(partitions) or 'none'}); "
                            "choose one with --default-resources slurm_partition=<name>")
            continue
        if any(node.cpus >= request.cpus and (request.mem_mb is None or node.mem_mb >= request.mem_mb)
               and _gpus(node.gres) >= request.gpus for node in members):
            continue
        wanted = f"{request.cpus} CPUs" + (f", {request.mem_mb} MB" if request.mem_mb is not None else "") + (
            f", {request.gpus} GPU(s)" if request.gpus else "")
        largest = max(members, key=lambda node: (node.cpus, node.mem_mb))
        problems.append(f"rule {request.rule}: asks for {wanted}, but no node of partition {partition!r} has as "
                        f"much (the largest: {largest.name}, {largest.cpus} CPUs, {largest.mem_mb} MB"
                        f"{', GRES ' + largest.gres if largest.gres else ''}); lower it (--max-threads N for "
                        "the CPUs of a timed job, mem_mb_per_cpu in the profile for its memory) or choose "
                        "another partition")
    return problems


def parse_scontrol_config(text: str) -> dict[str, str]:
    """``scontrol show config`` as a dict (``MinJobAge`` -> ``"300 sec"``, ...)."""
    settings = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            settings[key.strip()] = value.strip()
    return settings


def _seconds(value: str | None) -> int | None:
    if not value:
        return None
    number, _, unit = value.partition(" ")
    try:
        return int(number) * (3600 if unit.strip().lower() in ("h", "hour", "hours") else 1)
    except ValueError:
        return None


def status_problem(settings: dict[str, str], *, status_command: str | None, init_seconds: int,
                   sacct_available: bool) -> str | None:
    """Why the plugin could not see jobs finish on a cluster with this ``scontrol show config``, or None.

    Mirrors the plugin's choice: ``squeue`` falls back to ``sacct`` when ``MinJobAge`` is unknown or under
    three times ``init_seconds`` and ``sacct`` exists; ``sacct`` falls back to ``squeue`` when it is missing.
    """
    min_job_age = _seconds(settings.get("MinJobAge"))
    threshold = 3 * init_seconds
    accounting = settings.get("AccountingStorageType", "")
    command = status_command or ("sacct" if sacct_available else "squeue")
    if command == "squeue" and (min_job_age is None or min_job_age < threshold) and sacct_available:
        command = "sacct"
    if command == "sacct" and not sacct_available:
        command = "squeue"
    needs = (f"MinJobAge of at least {threshold} s (three times slurm-init-seconds-before-status-checks "
             f"= {init_seconds}) for the profile's squeue status, or job accounting (slurmdbd) for sacct")
    if command == "sacct" and accounting == NO_ACCOUNTING:
        why = ("the status command is sacct" if status_command == "sacct" else
               f"MinJobAge is {settings.get('MinJobAge', 'unknown')}, so the plugin queries sacct")
        return (f"SLURM job accounting is off (AccountingStorageType={NO_ACCOUNTING}) and {why}: the plugin "
                f"would never see a job finish and the run would hang. The cluster needs a {needs}.")
    if command == "squeue" and (min_job_age is None or min_job_age < threshold):
        return (f"squeue forgets a finished job after MinJobAge={settings.get('MinJobAge', 'unknown')}, before "
                f"the plugin's first status query, and there is no sacct: the run would hang. The cluster "
                f"needs a {needs}.")
    return None


def requests_from_jobs(jobs: Iterable, is_local: Callable[[object], bool]) -> list[Request]:
    """One request per distinct (rule, CPUs, memory, partition, GPUs) among the jobs SLURM would run."""
    seen = {}
    for job in jobs:
        if is_local(job):
            continue
        resources = job.resources
        threads = int(job.threads)
        explicit = resources.get("cpus_per_task")
        cpus = max(1, int(explicit)) if explicit is not None and int(explicit) >= 0 else threads
        per_cpu = resources.get("mem_mb_per_cpu")
        mem = int(per_cpu) * cpus if per_cpu else (int(resources["mem_mb"]) if resources.get("mem_mb") else None)
        request = Request(job.rule.name, cpus, mem, resources.get("slurm_partition") or None,
                          int(resources.get("gpu") or 0), threads if explicit is not None else None)
        seen.setdefault(request, None)
    return list(seen)


def _run(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise ValueError(f"SLURM pre-flight: `{' '.join(command)}` failed: {result.stderr.strip()} "
                         "(the SLURM profile needs SLURM's client commands talking to a running slurmctld)")
    return result.stdout


def check_slurm(requests: list[Request], *, status_command: str | None, init_seconds: int,
                run: Callable[[list[str]], str] = _run, sacct_available: bool | None = None) -> list[Node]:
    """Raise ``ValueError`` naming every request no node can run and any status query that cannot work.

    Returns the nodes sinfo reported (for the caller's log).
    """
    if shutil.which("sinfo") is None and run is _run:
        raise ValueError("SLURM pre-flight: sinfo is not on PATH; the SLURM profile needs SLURM's client "
                         "commands (sinfo, sbatch, squeue, scontrol)")
    nodes, default = parse_sinfo(run(SINFO))
    problems = unfit(requests, nodes, default)
    settings = parse_scontrol_config(run(["scontrol", "show", "config"]))
    if sacct_available is None:
        sacct_available = shutil.which("sacct") is not None
    status = status_problem(settings, status_command=status_command, init_seconds=init_seconds,
                            sacct_available=sacct_available)
    if status:
        problems.append(status)
    if problems:
        raise ValueError("SLURM pre-flight refused the run (nothing was submitted):\n  "
                         + "\n  ".join(problems) + "\n(workflows/README.md \"Running on a cluster\")")
    return nodes


def check_slurm_run(workflow) -> str | None:
    """The pre-flight of a Snakemake ``workflow`` about to run on SLURM; a one-line summary, or None elsewhere.

    Called from ``onstart`` (after the DAG is built, before any job is submitted).
    """
    plugin = getattr(workflow, "executor_plugin", None)
    if plugin is None or getattr(plugin, "name", None) != "slurm":
        return None
    settings = workflow.executor_settings
    requests = requests_from_jobs(workflow.dag.needrun_jobs(), lambda job: job.is_local)
    nodes = check_slurm(requests, status_command=getattr(settings, "status_command", None),
                        init_seconds=int(getattr(settings, "init_seconds_before_status_checks", None) or 40))
    fits = ", ".join(f"{request.rule} ({request.cpus} CPU{'s' if request.cpus > 1 else ''}"
                     + (f", {request.mem_mb} MB)" if request.mem_mb else ")")
                     for request in sorted(requests, key=lambda request: request.rule))
    return f"SLURM pre-flight: {len(nodes)} node(s); every job fits: {fits or 'no job to submit'}"
