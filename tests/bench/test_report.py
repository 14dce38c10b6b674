"""What a reader sees: bootstrap intervals and verdicts, the figure style (read back from the
matplotlib objects), experiment summaries, the report's sections, compare and the end screen."""

from __future__ import annotations

import json
import math
import shutil

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from sparsetir.bench.records import make_record
from sparsetir.bench.report import style
from sparsetir.bench.report.compare import compare, summary_line
from sparsetir.bench.report.document import render, write_report
from sparsetir.bench.report.endrun import screen, stage_of
from sparsetir.bench.report.intervals import Interval, geomean_interval, ratio_interval
from sparsetir.bench.report.summary import read_summary, records_interference, summary_from_records, write_summary
from sparsetir.timing.interference import interference_report


def noisy(median, spread, n=30, seed=0):
    rng = np.random.default_rng(seed)
    return list(median * np.exp(rng.normal(0.0, spread, n)))


def test_a_clear_speedup_is_a_win_and_a_noisy_small_one_a_tie():
    win = ratio_interval(noisy(2e-3, 0.05, seed=1), noisy(1e-3, 0.05, seed=2))
    assert 1.8 < win.value < 2.2 and win.low > 1.0 and win.verdict == "win"
    tie = ratio_interval(noisy(1.15e-3, 0.4, seed=3), noisy(1e-3, 0.4, seed=4))
    assert tie.low < 1.0 < tie.high and tie.verdict == "tie"
    loss = ratio_interval(noisy(1e-3, 0.05, seed=5), noisy(3e-3, 0.05, seed=6))
    assert loss.verdict == "loss" and loss.text().endswith(")") and "×" in loss.text()
    assert ratio_interval([], [1.0]).verdict == "n/a" and ratio_interval(None, [1.0]).text() == "n/a"


def test_paired_rounds_cancel_shared_noise():
    rng = np.random.default_rng(0)
    machine = np.exp(rng.normal(0.0, 0.5, 40))  # each round's slowdown, shared by both contenders
    paired = ratio_interval(2e-3 * machine, 1e-3 * machine)
    assert paired.value == pytest.approx(2.0) and paired.high - paired.low < 1e-9


def test_geomean_interval_holds_the_geomean():
    pairs = [(noisy(4e-3, 0.1, seed=s), noisy(1e-3, 0.1, seed=s + 10)) for s in range(3)]
    pairs.append((noisy(1e-3, 0.1, seed=7), noisy(1e-3, 0.1, seed=8)))
    interval = geomean_interval(pairs)
    singles = [ratio_interval(*pair).value for pair in pairs]
    assert interval.value == pytest.approx(math.exp(np.mean(np.log(singles))))
    assert interval.low <= interval.value <= interval.high and interval.verdict == "win"


def test_a_geomean_over_single_round_cases_has_no_interval():
    # one timed round per case (a two-epoch training run): nothing to resample, so no (x–x) interval
    interval = geomean_interval([([2e-3], [1e-3]), (noisy(2e-3, 0.1, seed=1), noisy(1e-3, 0.1, seed=2))])
    assert interval.value > 1.0 and math.isnan(interval.low) and interval.verdict == "n/a"
    assert interval.text() == f"{interval.value:.2f}×"


def test_speedup_axis_ticks_limits_and_colours():
    style.apply_style()
    limits = style.speedup_limits([0.7, 3.1, 1.4])
    assert limits == (0.5, 4.0)
    figure, axes = plt.subplots(2, 1, sharey=True)
    styles = style.series_styles([f"F={f}" for f in (32, 64, 128)])
    for axis in axes:
        style.grouped_bars(axis, ["cora", "pubmed"], list(styles), {("cora", "F=32"): 2.0, ("pubmed", "F=64"): 0.8},
                           {("cora", "F=32"): 1.8, ("pubmed", "F=64"): 0.7}, {("cora", "F=32"): 2.3,
                                                                            ("pubmed", "F=64"): 0.9}, styles)
        style.speedup_axis(axis, limits, "speedup")
    figure.canvas.draw()
    labels = [tick.get_text() for tick in axes[0].get_yticklabels()]
    assert labels == ["0.5×", "1×", "2×", "4×"]
    assert axes[0].get_ylim() == axes[1].get_ylim() == limits
    assert any(line.get_ydata()[0] == 1.0 for line in axes[0].get_lines())  # the 1× line
    colours = {tuple(patch.get_facecolor()) for patch in axes[0].patches}
    assert 1 <= len(colours) <= style.MAX_COLOURS
    many = style.series_styles([f"s{i}" for i in range(11)])
    assert len({colour for colour, _ in many.values()}) == 8 and len(set(many.values())) == 11
    plt.close(figure)


def test_save_figure_writes_png_and_svg(tmp_path):
    figure, axis = plt.subplots()
    axis.plot([1, 2], [1, 2])
    paths = style.save_figure(figure, tmp_path / "f.png")
    assert [p.suffix for p in paths] == [".png", ".svg"]
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG" and b"<svg" in (tmp_path / "f.svg").read_bytes()[:500]


def record(contender, median, *, dataset="cora", feat=32, status="ok", reason=None, experiment="spmm", seed=0,
           interference=None):
    stats = None
    if status == "ok":
        samples = noisy(median, 0.05, n=20, seed=seed)
        stats = {"median": float(np.median(samples)), "p20": float(np.percentile(samples, 20)),
                 "p80": float(np.percentile(samples, 80)), "mean": float(np.mean(samples)),
                 "min": float(np.min(samples)), "n": 20, "samples": samples, "interference": interference}
    return make_record(experiment=experiment, op=experiment, device="cpu", dataset=dataset, feat=feat,
                       contender=contender, status=status, reason=reason, stats=stats,
                       provenance={"cpu_model": "Test CPU", "usable_cpus": 2, "threads": 2, "flush": True,
                                   "timing": {"samples": 20, "min_samples": 5, "max_time_s": 1.0}})


CLEAN = interference_report(rounds=22, kept=20, flagged=2, repeated=2, trace={"t": []})
DIRTY = interference_report(rounds=30, kept=10, flagged=20, repeated=10, contaminated=True, trace={"t": []})


def make_results(folder, scale=1.0, contaminated=()):
    """An spmm summary over cora, pubmed, dblp; the datasets in ``contaminated`` measured contaminated."""
    summary = summary_from_records(spmm_records(scale, contaminated), "spmm", "SpMM", reference={"cpu": "best"},
                                   libraries=["scipy", "torch-csr-i32"], tables=["speedup.md"],
                                   figures=["figures/speedup_bars.png"])
    (folder / "spmm").mkdir(parents=True, exist_ok=True)
    write_summary(folder / "spmm" / "summary.json", summary)
    return summary


def spmm_records(scale=1.0, contaminated=()):
    records = []
    for index, dataset in enumerate(("cora", "pubmed", "dblp")):
        account = DIRTY if dataset in contaminated else CLEAN  # the contenders of a case share their rounds
        records += [record("sparsetir-csr", 1e-3 * scale, dataset=dataset, seed=index, interference=account),
                    record("scipy", 3e-3, dataset=dataset, seed=index + 10, interference=account),
                    record("torch-csr-i32", 2e-3, dataset=dataset, seed=index + 20, interference=account)]
    records.append(record("cupy-cusparse", None, status="unavailable", reason="cupy is not installed"))
    records.append(record("*", None, dataset="reddit", status="unavailable",
                          reason="unavailable: reddit: no mirror, downloads are disabled"))
    return records


def test_summary_headline_cases_and_pending(tmp_path):
    summary = make_results(tmp_path)
    (headline,) = summary["headline"]
    assert headline["contender"] == "sparsetir-csr" and headline["cases"] == 3 and headline["wins"] == 3
    assert headline["low"] <= headline["geomean"] <= headline["high"] and 1.7 < headline["geomean"] < 2.3
    assert {row["versus"] for row in summary["cases"]} == {"torch-csr-i32"}  # the best library per case
    reasons = {row["contender"]: row["reason"] for row in summary["pending"]}
    assert reasons["cupy-cusparse"] == "cupy is not installed" and "reddit" in reasons["*"]
    assert read_summary(tmp_path / "spmm" / "summary.json") == json.loads(json.dumps(summary))


def test_a_damaged_summary_is_refused(tmp_path):
    make_results(tmp_path)
    path = tmp_path / "spmm" / "summary.json"
    document = json.loads(path.read_text())
    document["pending"][0]["reason"] = ""
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match="reason"):
        read_summary(path)
    path.write_text('{"schema": "sparsetir.bench.summary/1"')
    with pytest.raises(ValueError, match="not a valid experiment summary"):
        read_summary(path)


def test_report_has_tables_pending_with_reasons_and_provenance(tmp_path):
    make_results(tmp_path)
    md_path, html_path = write_report(tmp_path, [tmp_path / "spmm" / "summary.json"], tmp_path / "report",
                                      config_hash="abc123")
    markdown = md_path.read_text()
    for section in ("## spmm: SpMM", "### Headline", "### Per case", "## Pending", "## Provenance", "abc123",
                    "cpu_model", "clock_source", "git_commit", "Test CPU, 2 usable cores"):
        assert section in markdown, section
    pending = markdown.split("## Pending", 1)[1].split("## Provenance", 1)[0]
    rows = [line for line in pending.splitlines() if line.startswith("| spmm")]
    assert len(rows) == 3  # cupy, reddit, and the cuda rows (no GPU records)
    assert all(line.rstrip(" |").split("|")[-1].strip() for line in rows)  # every row has a reason
    assert "<table>" in html_path.read_text() and "Pending" in html_path.read_text()
    assert "every case on cuda" not in render(tmp_path, [read_summary(tmp_path / "spmm" / "summary.json")],
                                              gpu_records=True)[0]


def test_compare_same_results_all_within_and_doctored_cases_flagged(tmp_path):
    reference, fresh = tmp_path / "reference", tmp_path / "fresh"
    make_results(reference)
    shutil.copytree(reference, fresh)
    same = compare(reference, fresh)
    assert summary_line(same) == "agreement: 3 of 3 clean cases within the spread (0 contaminated)"
    path = fresh / "spmm" / "summary.json"
    document = json.loads(path.read_text())
    document["cases"][1]["speedup"] *= 1.5  # doctored
    path.write_text(json.dumps(document))
    doctored = compare(reference, fresh)
    flagged = [row for row in doctored["rows"] if not row["within"]]
    assert summary_line(doctored) == "agreement: 2 of 3 clean cases within the spread (0 contaminated)"
    assert [row["case"] for row in flagged] == [document["cases"][1]["case"]]
    assert flagged[0]["ratio"] == pytest.approx(1.5)


def test_summary_counts_the_sentinels_rounds_and_contaminated_cases(tmp_path):
    summary = make_results(tmp_path, contaminated={"pubmed"})
    assert summary["interference"] == {"rounds": 22 + 30 + 22, "flagged": 2 + 20 + 2, "repeated": 2 + 10 + 2,
                                       "contaminated_cases": 1, "cases": 3, "judged": 3}
    assert {row["case"] for row in summary["cases"] if row["contaminated"]} == {"pubmed F=32 (cpu)"}
    assert records_interference(spmm_records(contaminated={"pubmed"})) == summary["interference"]  # speedup.md's
    document = json.loads((tmp_path / "spmm" / "summary.json").read_text())
    document["interference"]["flagged"] = 1000  # more flagged rounds than rounds
    (tmp_path / "spmm" / "summary.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match="interference"):
        read_summary(tmp_path / "spmm" / "summary.json")


def test_report_states_rounds_and_contaminated_cases_in_the_headline_and_per_experiment(tmp_path):
    make_results(tmp_path, contaminated={"dblp"})
    markdown, page = render(tmp_path, [read_summary(tmp_path / "spmm" / "summary.json")])
    top = markdown.split("## spmm", 1)[0]
    assert "rounds: 50 clean, 24 flagged (32.4%), 14 repeated; 1 of 3 cases contaminated" in top
    section = markdown.split("### Headline", 1)[1].split("### Per case", 1)[0]
    assert "Interference: rounds: 50 clean, 24 flagged" in section
    per_case = [line for line in markdown.split("### Per case", 1)[1].splitlines() if line.startswith("| dblp")]
    assert per_case and all("20 / 30 CONTAMINATED" in line for line in per_case)
    assert "1 of 3 cases contaminated" in page


def test_compare_lists_contaminated_cases_apart_and_judges_only_clean_ones(tmp_path, capsys):
    first, second = tmp_path / "a", tmp_path / "b"
    make_results(first, contaminated={"dblp"})
    make_results(second, scale=0.5, contaminated={"pubmed"})  # twice as fast: outside every interval
    result = compare(first, second)
    assert [row["case"] for row in result["rows"]] == ["cora F=32 (cpu)"]
    assert {row["case"]: row["contaminated_in"] for row in result["contaminated"]} == {
        "dblp F=32 (cpu)": ["first"], "pubmed F=32 (cpu)": ["second"]}
    assert summary_line(result) == "agreement: 0 of 1 clean cases within the spread (2 contaminated)"
    from sparsetir.bench.report.compare import main

    assert main([str(first), str(second), "-o", str(tmp_path / "compare.md")]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == summary_line(result)
    assert "Contaminated cases (2" in out and "second run, spmm: rounds: 50 clean, 24 flagged" in out
    assert (tmp_path / "compare.md").read_text() == out


def test_end_screen_lists_headlines_what_did_not_run_and_stages(tmp_path):
    make_results(tmp_path)
    bench = tmp_path / "benchmarks" / "run_case" / "spmm" / "cora"
    bench.mkdir(parents=True)
    (bench / "feat32.tsv").write_text("s\th:m:s\tmax_rss\n61.5\t0:01:01\t100\n")
    text = screen(tmp_path)
    assert "sparsetir-csr" in text and "3 wins" in text
    assert "unavailable" in text and "cupy is not installed" in text
    assert "time 1:02" in text and "Report:" in text
    assert "Interference: 9.1% of rounds flagged (rounds: 60 clean, 6 flagged (9.1%), 6 repeated; 0 of 3 cases" in text
    assert stage_of("prepare_dataset") == "data" and stage_of("rgcn_case") == "time"
    assert stage_of("speedup_figures") == "render" and stage_of("tune_case") == "tune"


def test_interval_text():
    assert Interval(1.564, 1.41, 1.7).text() == "1.56× (1.41–1.70)"
    assert Interval(1.1, 0.9, 1.3).verdict == "tie"
    assert pd.isna(Interval(float("nan"), 1, 2).value)
