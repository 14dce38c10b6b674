"""The workflow's GraphSAGE training tables (``speedup.csv``, ``.md``, ``.tex``) from the records.

One row per (mode, dataset, contender), over the seeds: ms per epoch (the median over seeds of
each run's median epoch after warm-up, with the mean beside it), the speedup over the best of
PyG and DGL on that (mode, dataset), compile seconds (first epoch's excess over the median;
sparsetir's kernel compile and conversion seconds beside it), the epoch split (the shares of
sparse ops, dense products and the rest of one profiled epoch), and test accuracy (mean and
standard deviation over seeds) with, for sparsetir rows on a labelled graph, whether it lies
within one standard deviation of PyG's (the fastest PyG variant's). The Markdown gives the
geometric mean speedup of each sparsetir contender per mode against its target, the machine's
load average while the jobs ran, and why any row did not run. Graphs without labels (random
features and labels) carry times only.

Figures: the GraphSAGE training figures (seaborn), from ``sage/speedup.csv``.

- ``epoch_time.png`` (and ``.svg``): ms per epoch per graph, one bar per contender, one panel per mode (linear
  axis from 0; graphs that did not train are named under it).
- ``accuracy_vs_time.png`` (and ``.svg``): test accuracy (mean, with the standard deviation over seeds as error
  bars) against ms per epoch, for every contender on the labelled graphs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import seaborn as sns

from ...records import write_text_atomic
from .. import style
from ..figures import time_figure
from ..intervals import geomean
from ..summary import interference_paragraph
from ..tables import headline_table, row_interval, speedup_cell, speedups_over_best

SPARSETIR_PREFIX = "sparsetir"
BASELINE_PREFIXES = ("pyg-", "dgl")
CASE = ["mode", "dataset"]


def read_records(paths) -> list[dict]:
    records = []
    for path in paths:
        records += json.loads(Path(path).read_text())
    return records


def is_baseline(contender: str) -> bool:
    return contender.startswith(BASELINE_PREFIXES)


SPLIT = ("sparse", "dense", "rest")


def _split_shares(ok: pd.DataFrame) -> dict:
    """The mean over seeds of each share of the profiled epoch (``epoch_split``; NaN where none)."""
    splits = [r for r in ok.get("epoch_split", pd.Series(dtype=object)) if isinstance(r, dict)]
    return {f"{kind}_share": float(np.mean([r[kind] for r in splits])) if splits else math.nan for kind in SPLIT}


def summary_frame(records: list[dict]) -> pd.DataFrame:
    """One row per (mode, dataset, contender) over the seeds (see the module docstring)."""
    rows = []
    frame = pd.DataFrame(records)
    if frame.empty:
        return pd.DataFrame(columns=["mode", "dataset", "contender", "status"])
    for (mode, dataset, contender), group in frame.groupby(["mode", "dataset", "contender"], sort=False):
        ok = group[group["status"] == "ok"]
        bad = group[group["status"] != "ok"]
        accuracies = [a for a in ok["test_acc"] if a is not None and not pd.isna(a)]
        row = {
            "mode": mode, "dataset": dataset, "contender": contender,
            "status": "ok" if bad.empty else bad["status"].iloc[0], "reason": None if bad.empty else bad["reason"].iloc[0],
            "labelled": bool(group["labelled"].iloc[0]) if group["labelled"].notna().any() else None,
            "nodes": group["nodes"].iloc[0], "edges": group["edges"].iloc[0], "seeds": len(ok),
            "ms_per_epoch": float(np.median(ok["median_ms"])) if len(ok) else math.nan,
            "mean_ms_per_epoch": float(np.mean(ok["mean_ms"])) if len(ok) else math.nan,
            "compile_s": float(np.mean(ok["compile_s"])) if len(ok) else math.nan,
            "kernel_compile_s": (float(np.mean([v for v in ok["kernel_compile_s"] if v is not None]))
                                 if len(ok) and ok["kernel_compile_s"].notna().any() else math.nan),
            "test_acc_mean": float(np.mean(accuracies)) if accuracies else math.nan,
            "test_acc_std": float(np.std(accuracies, ddof=1)) if len(accuracies) > 1 else math.nan,
            "epochs": (max(len(r) for r in ok["epoch_s"] if isinstance(r, list)) if "epoch_s" in ok and len(ok)
                       else math.nan),
            # every seed's timed epochs in seed order (the seeds' rounds pair up across contenders)
            "samples_s": [x for stats in ok.get("stats", pd.Series(dtype=object)) if isinstance(stats, dict)
                          for x in stats.get("samples") or []],
            **_split_shares(ok),
            "loadavg_1min": float(np.mean([r["provenance"]["loadavg"][0] for r in group.to_dict("records")
                                           if r.get("provenance", {}).get("loadavg")])) if len(group) else math.nan,
        }
        rows.append(row)
    table = pd.DataFrame(rows)
    table = speedups_over_best(table, CASE, table["contender"].map(is_baseline), "ms_per_epoch")
    within = []
    for _, row in table.iterrows():
        peers = table[(table["mode"] == row["mode"]) & (table["dataset"] == row["dataset"]) & (table["status"] == "ok")]
        pyg = peers[peers["contender"].str.startswith("pyg-")]
        if (row["contender"].startswith(SPARSETIR_PREFIX) and row["labelled"] and not pyg.empty
                and row["status"] == "ok"):
            reference = pyg.loc[pyg["ms_per_epoch"].idxmin()]
            std = reference["test_acc_std"]
            within.append(bool(abs(row["test_acc_mean"] - reference["test_acc_mean"]) <= std)
                          if np.isfinite(std) else None)
        else:
            within.append(None)
    table.insert(table.columns.get_loc("speedup_vs_best_baseline") + 1, "acc_within_pyg_std", within)
    return table


def _time_cell(row) -> str:
    if row["status"] != "ok":
        return row["status"]
    speedup = row_interval(row, "speedup_vs_best_baseline")
    return f"{row['ms_per_epoch']:.1f}" + (f" ({speedup_cell(speedup)})" if np.isfinite(speedup.value) else "")


def _accuracy_cell(row) -> str:
    if row["status"] != "ok" or not row["labelled"]:
        return "time only" if row["status"] == "ok" else row["status"]
    std = row["test_acc_std"]
    return f"{row['test_acc_mean']:.3f}" + (f" ± {std:.3f}" if np.isfinite(std) else "")


def wide(table: pd.DataFrame, mode: str, cell) -> pd.DataFrame:
    mine = table[table["mode"] == mode].copy()
    if mine.empty:
        return pd.DataFrame()
    mine["cell"] = mine.apply(cell, axis=1)
    pivot = mine.pivot(index="dataset", columns="contender", values="cell")
    order = list(dict.fromkeys(mine["contender"]))
    return pivot.reindex(columns=order).reindex(index=list(dict.fromkeys(mine["dataset"]))).reset_index()


def target_lines(table: pd.DataFrame, targets: dict) -> list[str]:
    """The geometric mean speedup of each sparsetir contender per mode, against its target."""
    lines = []
    for mode in dict.fromkeys(table["mode"]):
        target = targets.get(mode)
        for contender in dict.fromkeys(table[(table["mode"] == mode)]["contender"]):
            if not contender.startswith(SPARSETIR_PREFIX):
                continue
            rows = table[(table["mode"] == mode) & (table["contender"] == contender)]
            value = geomean(rows["speedup_vs_best_baseline"])
            datasets = int(np.isfinite(rows["speedup_vs_best_baseline"]).sum())
            if not np.isfinite(value):
                lines.append(f"- {mode}, {contender}: no speedup (no timed baseline)")
                continue
            verdict = "" if target is None else (f" (target {target}x: {'met' if value >= target else 'not met'})")
            lines.append(f"- {mode}, {contender}: geometric mean {value:.2f}x over the best of PyG and DGL on "
                         f"{datasets} graph(s){verdict}")
    for mode in dict.fromkeys(table["mode"]):  # the best sparsetir variant of each graph (features as stored)
        mine = table[(table["mode"] == mode) & table["contender"].str.startswith(SPARSETIR_PREFIX)]
        best = mine.groupby("dataset")["speedup_vs_best_baseline"].max()
        if mine["contender"].nunique() > 1 and np.isfinite(best).any():
            value, target = geomean(best), targets.get(mode)
            verdict = "" if target is None else f" (target {target}x: {'met' if value >= target else 'not met'})"
            lines.append(f"- {mode}, best sparsetir variant per graph: geometric mean {value:.2f}x on "
                         f"{int(np.isfinite(best).sum())} graph(s){verdict}")
    accuracy = table[table["acc_within_pyg_std"].notna()]
    for _, row in accuracy.iterrows():
        lines.append(f"- accuracy, {row['mode']} {row['dataset']} {row['contender']}: "
                     f"{'within' if row['acc_within_pyg_std'] else 'outside'} one standard deviation of PyG's")
    if "epochs" in table and table["epochs"].notna().any() and table["epochs"].min() < 50:
        lines.append(f"- accuracy after {int(table['epochs'].min())} epochs is not converged: it shows that every "
                     "contender trains the same model (same weights, same dropout masks); workflows/config/full.yaml "
                     "trains 200")
    single = table[(table["labelled"] == True) & (table["seeds"] == 1) & (table["status"] == "ok")]  # noqa: E712
    if not single.empty:
        lines.append("- accuracy: one seed per graph, so no standard deviation to compare against "
                     "(workflows/config/full.yaml runs 5 seeds)")
    return lines


def markdown(table: pd.DataFrame, targets: dict) -> str:
    parts = ["# sage: GraphSAGE training (ms per epoch; speedup over the best of PyG and DGL)", ""]
    if table.empty or (table["status"] != "ok").all():
        parts.append("No contender was timed.")
    load = table["loadavg_1min"].dropna() if "loadavg_1min" in table else pd.Series(dtype=float)
    if len(load):
        parts += [f"Load average (1 min) while the jobs ran: {load.min():.2f} to {load.max():.2f}.", ""]
    if not table.empty and "speedup_vs_best_baseline_low" in table:
        parts += ["## Headline", "", "Per sparsetir contender: the geometric mean of its speedups over the best of PyG "
                  "and DGL with its 90% bootstrap interval over the timed epochs, and its wins / ties / losses (a "
                  "tie: the interval straddles 1). Cells below: ms per epoch (speedup, 90% interval).", "",
                  headline_table(table, CASE).to_markdown(index=False), ""]
    for mode in dict.fromkeys(table["mode"]):
        parts += [f"## {mode}: ms per epoch (speedup)", "", wide(table, mode, _time_cell).to_markdown(index=False), "",
                  f"## {mode}: test accuracy", "", wide(table, mode, _accuracy_cell).to_markdown(index=False), ""]
    lines = target_lines(table, targets)
    if lines:
        parts += ["## Targets", "", *lines, ""]
    compile_rows = table[table["status"] == "ok"][["mode", "dataset", "contender", "compile_s", "kernel_compile_s"]]
    if not compile_rows.empty:
        parts += ["## Compile seconds (first epoch's excess over the median; sparsetir's kernel compiles)", "",
                  compile_rows.round(3).to_markdown(index=False), ""]
    split_columns = [f"{kind}_share" for kind in SPLIT]
    if not table.empty and all(c in table for c in split_columns) and table[split_columns].notna().any().any():
        shares = table[(table["status"] == "ok")][["mode", "dataset", "contender", *split_columns]].copy()
        for column in split_columns:
            shares[column] = shares[column].map(lambda v: f"{v:.0%}" if np.isfinite(v) else "--")
        parts += ["## Epoch split (one profiled epoch: sparse ops, dense products, the rest)", "",
                  "The Amdahl limit beside the speedup: a faster sparse kernel gains at most 1 / (1 - sparse share). "
                  "Classified by operator (sparsetir.bench.epoch_split); PyG's gather along the edges falls in the "
                  "rest.", "", shares.to_markdown(index=False), ""]
    unlabelled = table[table["labelled"] == False]["dataset"].unique()  # noqa: E712
    if len(unlabelled):
        parts += [f"Random features and labels (times only, no accuracy): {', '.join(unlabelled)}.", ""]
    failed = table[table["status"] != "ok"]
    if not failed.empty:  # one row per (mode, dataset, reason): an unavailable graph is one row, not one per contender
        grouped = (failed.groupby(["mode", "dataset", "reason"], sort=False)["contender"]
                   .apply(lambda names: ", ".join(names)).reset_index()[["mode", "dataset", "contender", "reason"]])
        parts += ["## Not run", "", grouped.to_markdown(index=False), ""]
    return "\n".join(parts)


def latex(table: pd.DataFrame) -> str:
    columns = ["mode", "dataset", "contender", "ms_per_epoch", "speedup_vs_best_baseline", "test_acc_mean",
               "test_acc_std", "compile_s"]
    shown = table[table["status"] == "ok"][columns] if not table.empty else pd.DataFrame(columns=columns)
    return shown.round(3).to_latex(index=False, escape=True, na_rep="--")


def write_tables(records: list[dict], targets: dict, csv: Path, md: Path, tex: Path) -> pd.DataFrame:

    table = summary_frame(records)
    write_text_atomic(csv, table.drop(columns=["samples_s"], errors="ignore").to_csv(index=False))
    write_text_atomic(md, markdown(table, targets) + interference_paragraph(records))
    write_text_atomic(tex, latex(table))
    return table


# ------------------------------------------------------------ figures

def _save(figure, path: Path) -> None:
    """PNG and SVG, atomically (``sparsetir.bench.report.style``)."""
    style.save_figure(figure, path)


def epoch_time_figure(frame: pd.DataFrame, path: Path) -> None:
    """ms per epoch per graph and contender, one panel per mode, on a linear axis from 0."""

    time_figure(frame, path, case=["mode", "dataset"], label=lambda row: str(row["dataset"]),
                title="GraphSAGE training: ms per epoch (lower is better)", value="ms_per_epoch",
                ylabel="ms per epoch (median over seeds)", panel="mode")


def accuracy_figure(frame: pd.DataFrame, path: Path) -> None:
    labelled = frame[(frame["status"] == "ok") & (frame["labelled"] == True)  # noqa: E712
                     & np.isfinite(frame["test_acc_mean"])]
    if labelled.empty:
        _save(style.message_figure("sage: no labelled graph was trained (time-only graphs carry no accuracy)"), path)
        return
    style.apply_style()
    palette = {name: colour for name, (colour, _) in style.series_styles(labelled["contender"]).items()}
    figure, axis = plt.subplots(figsize=(7, 4.5))
    sns.scatterplot(data=labelled, x="ms_per_epoch", y="test_acc_mean", hue="contender", style="dataset", s=70,
                    ax=axis, palette=palette)
    errors = labelled[np.isfinite(labelled["test_acc_std"])]
    if not errors.empty:
        axis.errorbar(errors["ms_per_epoch"], errors["test_acc_mean"], yerr=errors["test_acc_std"], fmt="none",
                      ecolor="grey", elinewidth=0.8, capsize=2)
    axis.set_xscale("log")
    style.plain_log_axis(axis, "x")
    axis.set_xlabel("ms per epoch")
    axis.set_ylabel("test accuracy")
    axis.set_title("GraphSAGE: accuracy against time per epoch")
    _save(figure, path)


def workflow_tables(records: list[Path], outputs: dict, settings: dict) -> pd.DataFrame:
    """The tables of the records files ``records`` (the workflow's tables job; the section's ``targets``)."""
    return write_tables(read_records(records), settings["targets"], outputs["csv"], outputs["md"], outputs["tex"])


def workflow_figures(csv: Path, outputs: dict) -> None:
    """The figures of ``speedup.csv`` (the workflow's figures job)."""
    table = pd.read_csv(csv)
    epoch_time_figure(table, outputs["epoch_time"])
    accuracy_figure(table, outputs["accuracy"])
