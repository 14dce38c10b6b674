"""The one speedup path of the family tables (sparsetir.bench.report.tables) and the figures' honesty
(sparsetir.bench.report.figures, style.grouped_bars): intervals from the interleaved rounds, verdicts,
the headline, a case that did not run named under a figure, a bar beyond the axis marked at its edge."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sparsetir.bench.report.figures import speedup_figure, time_figure
from sparsetir.bench.report.tables import add_speedups, headline_table, ratio_columns, row_interval, speedup_cell


def _row(dataset, contender, samples_ms, kind, status="ok", reason=None):
    samples = [s / 1e3 for s in samples_ms]
    return {"dataset": dataset, "contender": contender, "kind": kind, "status": status, "reason": reason,
            "median_ms": float(np.median(samples_ms)) if samples else np.nan,
            "mean_ms": float(np.mean(samples_ms)) if samples else np.nan, "samples_s": samples}


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    noisy = lambda centre, spread: list(centre * (1 + spread * rng.standard_normal(20)))  # noqa: E731
    rows = [_row("a", "sparsetir", noisy(5.0, 0.01), "sparsetir"), _row("a", "torch", noisy(10.0, 0.01), "baseline"),
            _row("a", "scipy", noisy(20.0, 0.01), "baseline"),
            _row("b", "sparsetir", noisy(10.0, 0.3), "sparsetir"), _row("b", "torch", noisy(10.0, 0.3), "baseline"),
            _row("c", "sparsetir", noisy(20.0, 0.01), "sparsetir"), _row("c", "torch", noisy(10.0, 0.01), "baseline"),
            _row("d", "*", [], "baseline", status="unavailable", reason="unavailable: no route has d")]
    return add_speedups(pd.DataFrame(rows), ["dataset"])


def test_speedups_are_over_the_fastest_baseline_with_intervals_and_verdicts(frame):
    ours = frame[frame["contender"] == "sparsetir"].set_index("dataset")
    assert (ours["best_baseline"] == "torch").all()
    assert ours.loc["a", "speedup_vs_best_baseline"] == pytest.approx(2.0, rel=0.02)
    for dataset, verdict in (("a", "win"), ("b", "tie"), ("c", "loss")):
        row = ours.loc[dataset]
        assert row["speedup_vs_best_baseline_low"] <= row["speedup_vs_best_baseline"] <= \
            row["speedup_vs_best_baseline_high"]
        assert row["speedup_vs_best_baseline_verdict"] == verdict, dataset
    assert speedup_cell(row_interval(ours.loc["b"])).endswith(" tie")
    assert frame[frame["dataset"] == "d"]["speedup_vs_best_baseline_verdict"].iloc[0] == "n/a"


def test_the_headline_counts_wins_ties_and_losses_with_an_interval(frame):
    (row,) = headline_table(frame, ["dataset"]).to_dict("records")
    assert (row["wins"], row["ties"], row["losses"], row["cases"]) == (1, 1, 1, 3)
    assert "(" in row["geomean"] and "–" in row["geomean"]  # the geomean's own interval


def test_a_single_round_has_a_value_but_no_interval():
    table = pd.DataFrame([_row("a", "sparsetir", [5.0], "sparsetir"), _row("a", "torch", [10.0], "baseline")])
    ratio_columns(table, ["dataset"], pd.Series(["torch", None]), pd.Series([2.0, np.nan]), "speedup")
    assert table["speedup"].iloc[0] == 2.0 and np.isnan(table["speedup_low"].iloc[0])
    assert table["speedup_verdict"].iloc[0] == "n/a"


def test_figures_name_what_did_not_run_and_mark_bars_beyond_the_axis(frame, tmp_path):
    extreme = frame.copy()
    extreme.loc[(extreme["dataset"] == "c") & (extreme["contender"] == "sparsetir"),
                ["speedup_vs_best_baseline", "speedup_vs_best_baseline_low", "speedup_vs_best_baseline_high"]] = 0.001
    label = lambda row: str(row["dataset"])  # noqa: E731
    png, svg = speedup_figure(extreme, tmp_path / "s.png", case=["dataset"], label=label, title="t")
    text = svg.read_text()
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "no route has d" in text and "d (not run)" in text  # the empty slot, labelled, and why
    assert "0.001×" in text  # the clipped bar's value, at the axis edge
    _, svg = time_figure(frame, tmp_path / "t.png", case=["dataset"], label=label, title="t", value="median_ms",
                         ylabel="ms per call (median)")
    text = svg.read_text()
    assert "ms per call (median)" in text and "no route has d" in text
