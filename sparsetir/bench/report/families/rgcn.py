"""The workflow's R-GCN tables (pandas): ``speedup.csv``, ``speedup.md`` and ``speedup.tex``.

From the records of every dataset (``sparsetir.bench.families.rgcn``):

- ``speedup.csv`` (long): one row per (dataset, contender), contenders and datasets that did not
  run included with their reason; milliseconds per inference (median, p20, p80, mean), the
  speedup over the best baseline of that dataset (``best baseline median / median``, > 1 is
  faster; ``_mean`` from the means), peak memory (MiB; ``sparsetir.bench.memory`` says how it is
  measured), and the conversion, compile and tuning times.
- ``speedup.md``: ms per inference (dataset x contender), sparsetir over the best baseline per
  dataset with the geometric mean, peak memory, preparation times, and what did not run and why.
- ``speedup.tex``: the ms-per-inference table with the speedup columns (booktabs).

"Best baseline" is the fastest timed baseline of the dataset (PyG ``RGCNConv``/``FastRGCNConv``,
DGL ``RelGraphConv``, the two plain torch ones); Graphiler cannot be installed and has a row
saying so.

Figures: the R-GCN figure (seaborn), from ``speedup.csv``.

``rgcn_inference.png`` (and ``.svg``) has two panels, one bar per (dataset, contender): milliseconds per
inference (median, linear axis from 0, each sparsetir contender's speedup over the best baseline written
above its bar) and peak memory (MiB). Contenders that did not run have no bar (the tables say why); datasets that
did not run are named under the axes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import seaborn as sns

from ...bounds import rate_percentages
from ...records import read_records, write_text_atomic
from .. import style, tables
from ..figures import not_run_note
from ..intervals import geomean, number_cell
from ..summary import interference_paragraph
from ..tables import INTERVAL_COLUMNS, add_speedups, headline_table

SPARSETIR = "sparsetir"
ALL = "*"
# The CPU target: end-to-end inference >= 4x geomean over the best baseline (the dense-tiles issue, which raised the
# first issue's 3x), none below 1.5x, and peak memory no higher than the best baseline's.
TARGET_GEOMEAN = 4.0
TARGET_MIN = 1.5
MIB = 2 ** 20
COLUMNS = ["dataset", "contender", "kind", "variant", "status", "reason", "nodes", "edges", "relations", "dims",
           "median_ms", "p20_ms", "p80_ms", "mean_ms", "samples", "best_baseline", "best_baseline_ms",
           "best_baseline_mean_ms", "speedup_vs_best_baseline", "speedup_vs_best_baseline_mean", "peak_mib", "prepare_peak_mib", "resident_mib", "memory_note",
           "convert_ms", "compile_s", "tune_s", "pct_fma", "pct_memory_bound"]


def _kind(record: dict) -> str:
    rgcn = record.get("rgcn") or {}
    if rgcn.get("kind"):
        return rgcn["kind"]
    return SPARSETIR if record["contender"].startswith(SPARSETIR) else "baseline"


def rgcn_frame(records: Iterable[dict]) -> pd.DataFrame:
    """The long table (see the module docstring); a later record of a (dataset, contender) wins."""
    rows = []
    for record in records:
        memory = record.get("memory") or {}
        rgcn = record.get("rgcn") or {}
        shape = record.get("shape") or [None]
        rows.append({
            "dataset": record["dataset"], "kind": _kind(record), **tables.timing_fields(record),
            "nodes": shape[0], "edges": record.get("nnz"), "relations": rgcn.get("num_relations"),
            "dims": "/".join(str(d) for d in rgcn["dims"]) if rgcn.get("dims") else None,
            "peak_mib": memory["peak_bytes"] / MIB if "peak_bytes" in memory else None,
            "prepare_peak_mib": memory["prepare_peak_bytes"] / MIB if "prepare_peak_bytes" in memory else None,
            "resident_mib": memory["resident_bytes"] / MIB if "resident_bytes" in memory else None,
            "memory_note": memory.get("error"),
            **dict(zip(("pct_fma", "pct_memory_bound"), rate_percentages(record))),
        })
    numeric = ("peak_mib", "prepare_peak_mib", "resident_mib", "nodes", "edges", "relations", "pct_fma",
               "pct_memory_bound")
    frame = tables.long_frame(rows, ["dataset"], numeric, what="R-GCN")
    frame["variant"] = frame["variant"].fillna("")
    frame = add_speedups(frame, ["dataset"])  # the best baseline per dataset, intervals and verdicts
    return frame[[*COLUMNS, *INTERVAL_COLUMNS, "samples_s"]]


def _ordered(frame: pd.DataFrame, dataset_order: Sequence[str]) -> list[str]:
    present = list(dict.fromkeys(frame["dataset"]))
    return [d for d in dataset_order if d in present] + [d for d in present if d not in dataset_order]


def _contenders(frame: pd.DataFrame) -> list[str]:
    names = [c for c in dict.fromkeys(frame["contender"]) if c != ALL]
    return sorted(names, key=lambda name: (not name.startswith(SPARSETIR), names.index(name)))


def wide(frame: pd.DataFrame, column: str, dataset_order: Sequence[str], digits: int = 2) -> pd.DataFrame:
    """Dataset x contender table of ``column``; "—" where a contender has no value, and the row of an
    unavailable dataset says so."""
    contenders = _contenders(frame)
    rows = []
    for dataset in _ordered(frame, dataset_order):
        mine = frame[frame["dataset"] == dataset].set_index("contender")
        if ALL in mine.index and len(mine) == 1:
            rows.append({"dataset": dataset, **{c: "unavailable" for c in contenders}})
            continue
        rows.append({"dataset": dataset, **{c: number_cell(mine[column].get(c), digits) for c in contenders}})
    return pd.DataFrame(rows, columns=["dataset", *contenders])


def speedup_summary(frame: pd.DataFrame, dataset_order: Sequence[str]) -> pd.DataFrame:
    """Per sparsetir contender and dataset: its ms, the best baseline and its ms, the speedups, and
    the memory of both; then a geometric-mean row per sparsetir contender."""
    rows = []
    ours = [c for c in _contenders(frame) if frame.loc[frame["contender"] == c, "kind"].eq(SPARSETIR).any()]
    for contender in ours:
        mine = []
        for dataset in _ordered(frame, dataset_order):
            row = frame[(frame["dataset"] == dataset) & (frame["contender"] == contender)]
            if row.empty:
                continue
            row = row.iloc[0]
            baseline = frame[(frame["dataset"] == dataset) & (frame["contender"] == row["best_baseline"])]
            baseline_memory = baseline["peak_mib"].iloc[0] if len(baseline) else math.nan
            lowest = frame[(frame["dataset"] == dataset) & (frame["kind"] == "baseline")
                           & (frame["status"] == "ok")]["peak_mib"].min()
            mine.append({"sparsetir": contender, "dataset": dataset, **tables.speedup_cells(row),
                         "sparsetir MiB": number_cell(row["peak_mib"], 1), "best baseline MiB": number_cell(baseline_memory, 1),
                         "lowest baseline MiB": number_cell(lowest, 1),
                         "_speedup": row["speedup_vs_best_baseline"], "_mean": row["speedup_vs_best_baseline_mean"]})
        rows += mine
        if mine:
            rows.append({"sparsetir": contender, "dataset": "geomean",
                         **tables.geomean_cells([r["_speedup"] for r in mine], [r["_mean"] for r in mine]),
                         "sparsetir MiB": "", "best baseline MiB": "", "lowest baseline MiB": ""})
    table = pd.DataFrame(rows)
    return table.drop(columns=[c for c in ("_speedup", "_mean") if c in table.columns])


def target_lines(frame: pd.DataFrame) -> list[str]:
    """Each sparsetir contender against the targets: geomean and lowest speedup over the best baseline,
    and its peak memory against the best (fastest) baseline's and the lowest baseline's."""
    lines = []
    ours = [c for c in _contenders(frame) if frame.loc[frame["contender"] == c, "kind"].eq(SPARSETIR).any()]
    for contender in ours:
        mine = frame[(frame["contender"] == contender) & frame["speedup_vs_best_baseline"].notna()]
        if mine.empty:
            lines.append(f"- {contender}: no dataset with both it and a baseline timed; the targets cannot be judged.")
            continue
        mean, low = geomean(mine["speedup_vs_best_baseline"]), mine["speedup_vs_best_baseline"].min()
        met = mean >= TARGET_GEOMEAN and low >= TARGET_MIN
        lines.append(f"- {contender}: geomean {mean:.2f}x over the best baseline on {len(mine)} dataset(s) "
                     f"({', '.join(mine['dataset'])}), lowest {low:.2f}x; target >= {TARGET_GEOMEAN:g}x geomean, "
                     f"none below {TARGET_MIN:g}x: {'met' if met else 'not met'}.")
        for _, row in mine.iterrows():
            peers = frame[(frame["dataset"] == row["dataset"]) & (frame["kind"] == "baseline") & (frame["status"] == "ok")]
            fastest = peers.loc[peers["contender"] == row["best_baseline"], "peak_mib"]
            fastest = fastest.iloc[0] if len(fastest) else math.nan
            lowest = peers["peak_mib"].min()
            if not math.isfinite(row["peak_mib"]) or not math.isfinite(fastest):
                lines.append(f"  - {row['dataset']}: peak memory not measured for both.")
                continue
            lines.append(f"  - {row['dataset']}: peak memory {row['peak_mib']:.1f} MiB against {fastest:.1f} MiB for "
                         f"the best baseline ({row['best_baseline']}): "
                         f"{'no higher' if row['peak_mib'] <= fastest else 'higher'}; the lowest of any baseline is "
                         f"{lowest:.1f} MiB.")
    return lines


def preparation_table(frame: pd.DataFrame, dataset_order: Sequence[str]) -> pd.DataFrame:
    """Conversion (ms), compile (s) and tuning (s) per timed contender and dataset."""
    rows = []
    for dataset in _ordered(frame, dataset_order):
        for _, row in frame[(frame["dataset"] == dataset) & (frame["status"] == "ok")].iterrows():
            rows.append({"dataset": dataset, "contender": row["contender"], "variant": row["variant"],
                         "convert ms": number_cell(row["convert_ms"], 1), "compile s": number_cell(row["compile_s"], 2),
                         "tune s": number_cell(row["tune_s"], 1), "resident MiB": number_cell(row["resident_mib"], 1),
                         "prepare peak MiB": number_cell(row["prepare_peak_mib"], 1)})
    return pd.DataFrame(rows)


def not_run_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[frame["status"] != "ok"]
    notes = frame[(frame["status"] == "ok") & frame["memory_note"].notna()]
    table = rows[["dataset", "contender", "status", "reason"]]
    if len(notes):
        memory = notes[["dataset", "contender"]].assign(status="memory not measured", reason=notes["memory_note"])
        table = pd.concat([table, memory])
    return table.reset_index(drop=True)


def markdown_report(frame: pd.DataFrame, dataset_order: Sequence[str] = ()) -> str:
    dims = ", ".join(sorted(set(frame["dims"].dropna()))) or "n/a"
    lines = [
        "# rgcn: R-GCN inference, ms per inference (median)",
        "",
        f"Two layers (feature/hidden/output {dims}), every contender with the same inputs and weights, checked "
        "against a float64 reference before timing, timed interleaved with a cache flush before every call. "
        "Speedups are the best baseline's time over the contender's (> 1 is faster); the best baseline is the "
        "fastest of PyG RGCNConv/FastRGCNConv, DGL RelGraphConv and the plain torch ones on each dataset. Peak "
        "memory: highest RSS during inference minus the RSS with the inputs built, each contender in a fresh "
        "process (sparsetir/bench/memory.py).",
        "",
    ]
    lines += tables.markdown_sections(
        ("## Headline", tables.HEADLINE_NOTE.format(versus="best baseline"), headline_table(frame, ["dataset"])),
        ("## ms per inference (median)", wide(frame, "median_ms", dataset_order, 3)),
        ("## sparsetir over the best baseline", speedup_summary(frame, dataset_order)),
        ("## Targets", target_lines(frame)),
        ("## Peak memory (MiB)", wide(frame, "peak_mib", dataset_order, 1)),
        ("## Preparation: conversion, compile and tuning", preparation_table(frame, dataset_order)),
        ("## Did not run", not_run_table(frame)))
    return "\n".join(lines)


def latex_table(frame: pd.DataFrame, dataset_order: Sequence[str] = ()) -> str:
    table = wide(frame, "median_ms", dataset_order, 3)
    ours = [c for c in table.columns if c.startswith(SPARSETIR)]
    for contender in ours:
        speedups = frame[frame["contender"] == contender].set_index("dataset")["speedup_vs_best_baseline"]
        table[f"{contender} speedup"] = [number_cell(speedups.get(d)) for d in table["dataset"]]
    return table.to_latex(index=False, escape=True)


def write_tables(records: list[dict], csv: Path, md: Path, tex: Path, dataset_order: Sequence[str] = ()) -> pd.DataFrame:
    """Aggregate ``records`` and write the three tables atomically; return the long frame."""

    frame = rgcn_frame(records)
    write_text_atomic(csv, frame.drop(columns=["samples_s"]).to_csv(index=False))
    write_text_atomic(md, markdown_report(frame, dataset_order) + interference_paragraph(records))
    write_text_atomic(tex, latex_table(frame, dataset_order))
    return frame


# ------------------------------------------------------------ figures

SPARSETIR = "sparsetir"


def _save(figure, path: Path) -> None:
    """PNG and SVG, atomically (``sparsetir.bench.report.style``)."""
    style.save_figure(figure, path)


def inference_figure(frame: pd.DataFrame, path: Path) -> None:
    """ms per inference and peak memory per dataset and contender (see the module docstring)."""
    timed = frame[(frame["status"] == "ok") & frame["median_ms"].notna()].copy()
    if timed.empty:
        figure, axis = plt.subplots(figsize=(6, 2))
        axis.axis("off")
        reasons = "; ".join(f"{d}: {r}" for d, r in frame[["dataset", "reason"]].drop_duplicates().values[:3])
        axis.text(0.5, 0.5, f"rgcn: nothing was timed ({reasons})", ha="center", va="center", wrap=True)
        _save(figure, path)
        return
    style.apply_style()
    order = list(dict.fromkeys(timed["contender"]))
    palette = {name: colour for name, (colour, _) in style.series_styles(order).items()}
    figure, axes = plt.subplots(1, 2, figsize=(max(9, 2.2 * timed["dataset"].nunique() + 7), 4.2))
    bars = sns.barplot(data=timed, x="dataset", y="median_ms", hue="contender", hue_order=order, palette=palette,
                       ax=axes[0])
    axes[0].set_ylim(bottom=0)  # a linear axis from 0: bar heights compare as the times do
    axes[0].set_ylabel("ms per inference (median)")
    axes[0].set_xlabel("")
    axes[0].set_title("R-GCN inference (2 layers)")
    datasets = list(dict.fromkeys(timed["dataset"]))
    for container, contender in zip(bars.containers, order):
        if not contender.startswith(SPARSETIR):
            continue
        mine = timed[timed["contender"] == contender].set_index("dataset")
        labels = []
        for dataset in datasets:
            speedup = mine["speedup_vs_best_baseline"].get(dataset, math.nan)
            labels.append(f"{speedup:.1f}x" if isinstance(speedup, float) and math.isfinite(speedup) else "")
        axes[0].bar_label(container, labels=labels[:len(container)], fontsize="x-small", padding=2)
    memory = timed[timed["peak_mib"].notna()]
    if len(memory):
        sns.barplot(data=memory, x="dataset", y="peak_mib", hue="contender", hue_order=order, palette=palette,
                    ax=axes[1])
        axes[1].set_ylabel("peak memory during inference (MiB)")
    else:
        axes[1].text(0.5, 0.5, "memory not measured", ha="center", va="center", transform=axes[1].transAxes)
    axes[1].set_xlabel("")
    axes[1].set_title("peak memory (RSS growth, fresh process each)")
    for axis in axes:
        if axis.get_legend() is not None:
            axis.get_legend().remove()
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize="small",
                  bbox_to_anchor=(0.5, -0.08))
    figure.tight_layout()

    missing = [f"{d} ({r})" for d, r in frame[frame["contender"] == "*"][["dataset", "reason"]].values]
    not_run_note(figure, missing)
    _save(figure, path)


def workflow_tables(records: list[Path], outputs: dict, settings: dict) -> pd.DataFrame:
    """The tables of the records files ``records`` (the workflow's tables job; datasets in the section's order)."""
    return write_tables(read_records(records), outputs["csv"], outputs["md"], outputs["tex"], settings["datasets"])


def workflow_figures(csv: Path, outputs: dict) -> None:
    """The figure of ``speedup.csv`` (the workflow's figures job)."""
    inference_figure(pd.read_csv(csv), outputs["figure"])
