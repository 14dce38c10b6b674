"""The CI smoke workflow end to end, killed midway and resumed: tables, figures, report.

One scratch folder goes through the whole story: a run is killed (SIGKILL, the whole process
group) as soon as its first case has finished; the restarted run keeps that result untouched
and redoes only what was unfinished; the tables, figures and HTML report then exist, a graph
that no route provides has rows that say why, and a failing contender has its own row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from harness_config import pending_families, workflow_families
from smoke_runner import RESULTS, SMOKE, finished_records

pytestmark = pytest.mark.slow  # the whole workflow, run twice (killed, then resumed): about two minutes




def test_a_killed_run_keeps_finished_results_and_redoes_the_rest(smoke_run):
    workdir, kept, log = smoke_run
    for path, (mtime, content) in kept.items():
        assert path.stat().st_mtime_ns == mtime and path.read_bytes() == content, path
        assert f"output: {path.relative_to(workdir)}" not in log  # not run again
    assert len(finished_records(workdir)) == 6 > len(kept)
    assert not list((workdir / "results").rglob("*.tmp"))  # atomic writes leave no partial files
    assert sorted(path.name for path in (workdir / "results").iterdir()) == ["smoke"]  # not the default run's files


def test_tables_say_why_a_graph_or_a_contender_did_not_run(smoke_run):
    workdir, _, _ = smoke_run
    table = pd.read_csv(workdir / RESULTS / "spmm" / "speedup.csv")
    reddit = table[table.dataset == "reddit"]
    assert list(reddit.contender) == ["*"] and reddit.reason.iloc[0].startswith("unavailable: ")
    assert "downloads are disabled" in reddit.reason.iloc[0]
    timed = table[(table.dataset == "cora") & (table.status == "ok")]
    assert {"sparsetir-csr", "scipy", "torch-csr-i32", "pyg-edgeindex"} <= set(timed.contender)
    assert (timed.speedup_vs_reference > 0).all() and (timed.dram_fraction > 0).all()
    cupy = table[table.contender == "cupy-cusparse"]
    assert (cupy.status == "unavailable").all() and cupy.reason.str.contains("cupy").all()
    markdown = (workdir / RESULTS / "spmm" / "speedup.md").read_text()
    assert "| reddit" in markdown and "unavailable" in markdown and "90% bootstrap interval" in markdown
    assert "## Headline" in markdown and "×" in markdown
    sddmm = pd.read_csv(workdir / RESULTS / "sddmm" / "speedup.csv")
    assert set(sddmm[sddmm.status == "ok"].reference) == {"torch-sampled-addmm"}


def test_records_carry_provenance_and_separate_times(smoke_run):
    workdir, _, _ = smoke_run
    records = json.loads((workdir / RESULTS / "spmm" / "records" / "cora" / "feat8.json").read_text())
    sparsetir = next(r for r in records if r["contender"] == "sparsetir-csr")
    assert sparsetir["status"] == "ok" and sparsetir["times"]["compile_s"] is not None
    assert sparsetir["provenance"]["env"]["GOMP_SPINCOUNT"] == "10000"
    assert sparsetir["provenance"]["env"]["TVM_THREAD_POOL_SPIN_COUNT"] == "1000"
    assert sparsetir["provenance"]["versions"]["torch"] and sparsetir["copy_bytes_per_s"] > 0


def test_the_tuned_contender_records_its_configuration_and_tuning_time(smoke_run):
    workdir, _, _ = smoke_run
    for experiment in ("spmm", "sddmm"):
        tuned = json.loads((workdir / RESULTS / experiment / "tuned" / "cora" / "feat8.json").read_text())
        assert tuned["status"] == "ok" and 1 <= tuned["trials"] <= 3 and tuned["config"]["format"]
        records = json.loads((workdir / RESULTS / experiment / "records" / "cora" / "feat8.json").read_text())
        record = next(r for r in records if r["contender"] == "sparsetir-tuned")
        assert record["status"] == "ok" and record["variant"].startswith(tuned["config"]["format"])
        assert record["times"]["tune_s"] > 0
    unavailable = json.loads((workdir / RESULTS / "spmm" / "tuned" / "reddit" / "feat8.json").read_text())
    assert unavailable["status"] == "unavailable" and "reddit" in unavailable["reason"]


def test_figures_pending_tables_and_the_html_report(smoke_run):
    workdir, _, _ = smoke_run
    for experiment in ("spmm", "sddmm"):
        for figure in ("speedup_bars.png", "roofline.png"):
            assert (workdir / RESULTS / experiment / "figures" / figure).read_bytes()[:4] == b"\x89PNG"
    smoke = yaml.safe_load(Path(SMOKE).read_text())
    implemented = workflow_families()  # the registry, as workflows/rules/common.smk reads it
    for experiment in pending_families(smoke, implemented):
        assert "not implemented yet" in (workdir / RESULTS / experiment / "speedup.md").read_text()
    for experiment in ("spmm", "sddmm"):
        for figure in ("speedup_bars.svg", "roofline.svg"):
            assert b"<svg" in (workdir / RESULTS / experiment / "figures" / figure).read_bytes()[:2000]
    report = (workdir / RESULTS / "report.md").read_text()
    for section in ("## spmm", "## sddmm", "### Headline", "## Pending", "## Provenance", "config_hash", "git_commit"):
        assert section in report, section
    pending = report.split("## Pending", 1)[1].split("## Provenance", 1)[0]
    assert "reddit" in pending and "unavailable" in pending and "every case on cuda" in pending
    page = (workdir / RESULTS / "report.html").read_text()
    assert page.startswith("<!doctype html>") and "spmm/figures/speedup_bars.svg" in page


def test_the_sage_tables_give_times_accuracy_and_why_a_graph_did_not_run(smoke_run):
    workdir, _, _ = smoke_run
    table = pd.read_csv(workdir / RESULTS / "sage" / "speedup.csv")
    cora = table[(table["dataset"] == "cora") & (table["status"] == "ok")]
    assert set(cora["mode"]) == {"full", "minibatch"} and "sparsetir" in set(cora["contender"])
    assert (cora["ms_per_epoch"] > 0).all() and cora["test_acc_mean"].between(0, 1).all()
    unavailable = table[table["dataset"] == "dblp"]  # mirror only: the smoke run has none
    assert len(unavailable) and (unavailable["status"] == "unavailable").all()
    assert unavailable["reason"].str.contains("dblp").all()
    assert "## Targets" in (workdir / RESULTS / "sage" / "speedup.md").read_text()
    for figure in ("epoch_time.png", "accuracy_vs_time.png"):
        assert (workdir / RESULTS / "sage" / "figures" / figure).read_bytes()[:4] == b"\x89PNG"



def test_the_run_names_what_it_cannot_get_at_the_start_and_every_one_at_the_end(smoke_run):
    from sparsetir.bench.report.endrun import screen
    from sparsetir.data.availability import SURVEY_FILE, read_survey

    workdir, _, log = smoke_run
    assert log.count("Data for this run") == 1  # once per run, before the jobs
    assert log.index("Data for this run") < log.index("Job stats")
    _, rows = read_survey(workdir / RESULTS / SURVEY_FILE)  # kept by the run's onstart
    assert {row.dataset for row in rows if row.status == "unavailable"} == {"reddit", "bgs", "dblp"}
    lines = screen(workdir / RESULTS).splitlines()
    start = lines.index("Data it could not get (3 datasets; their rows say unavailable):")
    assert "downloads are disabled" in lines[start + 1]
    for name in ("reddit [spmm, sddmm]", "bgs [rgcn]", "dblp [sage]"):
        assert name in lines[start + 1], lines[start + 1]


def test_the_run_starts_with_the_machine_check_and_keeps_it(smoke_run):
    workdir, _, log = smoke_run
    check = json.loads((workdir / RESULTS / "machine.json").read_text())
    assert {"load_average", "other_cpu_cores", "steal_cores", "memory", "cpufreq", "threads", "busy"} <= set(check)
    assert "machine check (" in log and ("quiet:" in log or "busy:" in log)


def test_every_family_runs_in_the_smoke_run_and_its_headline_has_rounds_behind_its_interval(smoke_run):
    from sparsetir.bench.report.summary import read_summary

    workdir, _, _ = smoke_run
    smoke = yaml.safe_load(Path(SMOKE).read_text())
    implemented = workflow_families()  # the registry, as workflows/rules/common.smk reads it
    assert smoke["every_family"] and set(pending_families(smoke, implemented)) <= set(smoke["left_out"])
    attention = pd.read_csv(workdir / RESULTS / "attention" / "speedup.csv")
    assert set(attention[attention["status"] == "ok"]["experiment"]) == {"attention", "prunedbert"}
    sage = read_summary(workdir / RESULTS / "sage" / "summary.json")
    assert sage["headline"]
    for row in sage["headline"]:  # four timed epochs per contender: an interval, not (x–x)
        assert row["low"] is not None and row["low"] < row["high"], row
