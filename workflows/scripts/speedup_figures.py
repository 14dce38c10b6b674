"""Workflow step: the figures of one experiment, from its ``speedup.csv`` (style: ``sparsetir.bench.report.style``).

- ``speedup_bars.png`` (and ``.svg``): speedup over the reference per dataset, one bar per feature
  size, one panel per sparsetir contender (and device), all panels on one log2 y-range with
  ``×`` ticks, bars growing from the 1× line (a bar beyond the axis marked at its edge with its
  value), error bars from the 90% bootstrap interval, the datasets that did not run named under
  the axes, and
  the geometric mean with its interval and the wins / ties / losses (from ``summary.json``) in
  each panel's title.
- ``roofline.png`` (and ``.svg``): achieved bandwidth (min-bytes model, GB/s) against arithmetic
  intensity (flops per minimum byte); libraries by colour (markers once there are more than
  eight), every point labelled with its dataset, the copy bandwidth measured in the same run as
  the roof.
"""


from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sparsetir.bench.report import style

SPARSETIR_PREFIX = "sparsetir"


def _timed_speedups(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == "ok") & frame["contender"].str.startswith(SPARSETIR_PREFIX)
                 & np.isfinite(frame["speedup_vs_reference"])].copy()


def _headline_text(summary: dict | None, contender: str, device: str, cases: int) -> str:
    """``geomean 1.56× (1.41–1.70) over 12 cases`` from the experiment's summary (its bootstrap interval)."""
    for row in (summary or {}).get("headline", []):
        if row["contender"] == contender and row.get("device") == device and row["geomean"] is not None:
            interval = f" ({row['low']:.2f}–{row['high']:.2f})" if row["low"] is not None else ""
            return (f"geomean {row['geomean']:.2f}×{interval} over {row['cases']} cases "
                    f"({row['wins']} wins, {row['ties']} ties, {row['losses']} losses)")
    return f"{cases} cases"


def bar_figure(frame: pd.DataFrame, path: Path, experiment: str = "", summary: dict | None = None) -> list[Path]:
    """Grouped speedup bars of the sparsetir contenders (see the module docstring)."""
    style.apply_style()
    timed = _timed_speedups(frame)
    if timed.empty:
        return style.save_figure(style.message_figure(
            f"{experiment}: no sparsetir contender was timed against a reference"), path)
    timed["panel"] = timed["contender"] + " (" + timed["device"] + ", vs " + timed["reference"].fillna("?") + ")"
    timed.loc[timed["device"] == "cpu", "panel"] = timed["contender"] + " (cpu, vs the best CPU library)"
    panels = list(dict.fromkeys(timed["panel"]))
    datasets = list(dict.fromkeys(timed["dataset"]))
    feats = sorted(timed["feat"].unique())
    limits = style.speedup_limits([*timed["speedup_vs_reference"], *timed["speedup_vs_reference_low"],
                                   *timed["speedup_vs_reference_high"]])
    figure, axes = plt.subplots(len(panels), 1, figsize=(max(6.0, 0.8 * len(datasets) + 3), 2.8 * len(panels)),
                                squeeze=False, sharey=True)
    styles = style.series_styles([f"F={f}" for f in feats])
    for axis, panel in zip(axes[:, 0], panels):
        mine = timed[timed["panel"] == panel]
        key = {(row.dataset, f"F={row.feat}"): row for row in mine.itertuples()}
        style.grouped_bars(axis, datasets, list(styles),
                           {k: r.speedup_vs_reference for k, r in key.items()},
                           {k: r.speedup_vs_reference_low for k, r in key.items()},
                           {k: r.speedup_vs_reference_high for k, r in key.items()}, styles, limits=limits)
        style.speedup_axis(axis, limits, "speedup")
        first = mine.iloc[0]
        axis.set_title(f"{experiment} {panel}: {_headline_text(summary, first.contender, first.device, len(mine))}")
        axis.legend(title="feature size", fontsize="small", ncol=min(len(feats), 8), loc="upper right")
    figure.tight_layout()
    from sparsetir.bench.report.figures import not_run_note

    missing = frame[(frame["contender"] == "*") | ~frame["dataset"].isin(datasets)]
    not_run_note(figure, [f"{d} F={f} ({r})" for d, f, r in
                          missing[["dataset", "feat", "reason"]].drop_duplicates(["dataset", "feat"]).values
                          if d not in datasets])
    return style.save_figure(figure, path)


def roofline_figure(frame: pd.DataFrame, path: Path, experiment: str = "") -> list[Path]:
    """Achieved GB/s against arithmetic intensity, with the measured copy bandwidth as the roof."""
    style.apply_style()
    timed = frame[(frame["status"] == "ok") & np.isfinite(frame["gbytes_per_s"])].copy()
    if timed.empty:
        return style.save_figure(style.message_figure(f"{experiment}: nothing was timed"), path)
    timed["intensity"] = timed["flops"] / timed["min_bytes"]
    styles = style.series_styles(timed["contender"])
    figure, axis = plt.subplots(figsize=(8, 5))
    for contender, rows in timed.groupby("contender", sort=False):
        colour, marker = styles[contender]
        axis.scatter(rows["intensity"], rows["gbytes_per_s"], color=colour, marker=marker, s=28, label=contender,
                     zorder=3)
        for row in rows.itertuples():
            axis.annotate(f"{row.dataset}/{row.feat}", (row.intensity, row.gbytes_per_s), fontsize=5,
                          xytext=(3, 2), textcoords="offset points", color=colour)
    for device, rows in timed.groupby("device"):
        roof = rows["copy_bytes_per_s"].median() / 1e9
        if np.isfinite(roof):
            axis.axhline(roof, linestyle="--", color="gray", linewidth=1)
            axis.text(timed["intensity"].min(), roof, f" copy bandwidth ({device}) {roof:.1f} GB/s", va="bottom",
                      fontsize="small")
    axis.set_xscale("log")
    axis.set_yscale("log")
    style.plain_log_axis(axis, "x")
    style.plain_log_axis(axis, "y")
    axis.set_xlabel("arithmetic intensity (flop per minimum byte)")
    axis.set_ylabel("achieved GB/s (min-bytes model)")
    axis.set_title(f"{experiment}: achieved bandwidth per case (labels: dataset/feature size)")
    axis.legend(fontsize="x-small", bbox_to_anchor=(1.02, 1), loc="upper left", title="contender")
    figure.tight_layout()
    return style.save_figure(figure, path)


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        from sparsetir.bench.report.summary import read_summary

        table = pd.read_csv(snakemake.input.csv)
        bar_figure(table, Path(snakemake.output.bars), snakemake.wildcards.experiment,
                   read_summary(snakemake.input.summary))
        roofline_figure(table, Path(snakemake.output.roofline), snakemake.wildcards.experiment)
