"""The workflow's sparse-convolution tables (pandas): ``speedup.csv``, ``speedup.md`` and ``speedup.tex``.

From the records of every (cloud, voxel size) job (``sparsetir.bench.families.conv``):

- ``speedup.csv`` (long): one row per (cloud, voxel size, case, contender), those that did not run
  included with their reason: milliseconds per call (median, p20, p80, mean), the fastest timed
  baseline of the case and the speedup over it (``best / median``, > 1 is faster; ``_mean`` from
  the means), the kernel-map building time of the contender's library (``map_ms``: sparsetir's
  ``kernel_map`` for sparsetir and plain torch, spconv's rules for spconv; set-up, not kernel
  time), conversion, compile and tuning times, and for a wrong contender the rows that differ; the
  contender's % of the measured FMA rate (useful flops) and of the memory bound (minimum bytes at
  the copy bandwidth; none for the network), from the rates every record carries.
- ``speedup.md``: ms per layer (layer x contender), the speedup of each sparsetir contender over
  the best baseline per layer with its geometric mean and minimum against the issue's target,
  kernel-map building (sparsetir against spconv), the end-to-end network, and what did not run.
- ``speedup.tex``: the per-layer ms table (booktabs).

Figures: the sparse-convolution figure (seaborn), from ``speedup.csv``.

``conv_speedup.png`` has two panels: each sparsetir contender's speedup over the best baseline per
layer and for the end-to-end network (bars; lines at 1x and at the 1.5x target), and kernel-map
building per layer, sparsetir against spconv (ms, linear axis from 0). Cases or contenders that did not run
have no bar; the tables say why.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from pathlib import Path

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import seaborn as sns

from ...bounds import rate_percentages
from ...records import read_records, write_bytes_atomic
from .. import tables
from ..figures import not_run_note
from ..intervals import geomean, number_cell
from ..summary import interference_paragraph
from ..tables import INTERVAL_COLUMNS, add_speedups, headline_table

SPARSETIR = "sparsetir"
ALL = "*"
# The CPU targets (the dense-tiles issue, which raised the first issue's 1.5x): per-layer geomean >= 1.8x over the
# best correct baseline (spconv at all threads or one, torch gather-mm), none below 1.0x; the whole network >= 1.3x;
# layers with >= 64 input channels at >= 50% of the measured FMA rate; kernel-map building no slower than spconv's.
TARGET_GEOMEAN = 1.8
TARGET_MIN = 1.0
TARGET_NETWORK = 1.3
TARGET_FMA_PCT = 50.0
TARGET_FMA_CHANNELS = 64
COLUMNS = ["cloud", "voxel_size", "case", "layer", "c_in", "c_out", "stride", "level", "inputs", "outputs", "pairs",
           "contender", "kind", "variant", "status", "reason", "median_ms", "p20_ms", "p80_ms", "mean_ms", "samples",
           "best_baseline", "best_baseline_ms", "best_baseline_mean_ms", "speedup_vs_best_baseline",
           "speedup_vs_best_baseline_mean", "pct_fma", "pct_memory_bound", "map_ms", "map_library", "convert_ms",
           "compile_s", "tune_s", "wrong_rows"]
CASE_KEYS = ["cloud", "voxel_size", "case", "layer"]


def conv_frame(records: Iterable[dict]) -> pd.DataFrame:
    """The long table (see the module docstring); a later record of a (case, contender) wins."""
    rows = []
    for record in records:
        conv = record.get("conv") or {}
        rows.append({
            "cloud": record["dataset"], "voxel_size": conv.get("voxel_size"), "case": conv.get("case", ALL),
            "layer": conv.get("layer", ALL), **{key: conv.get(key) for key in
                                                ("c_in", "c_out", "stride", "level", "inputs", "outputs", "pairs")},
            "kind": conv.get("kind") or (SPARSETIR if record["contender"].startswith(SPARSETIR) else "baseline"),
            **tables.timing_fields(record),
            "map_ms": conv["map_s"] * 1e3 if conv.get("map_s") is not None else None,
            "map_library": conv.get("map_library"), "wrong_rows": conv.get("wrong_rows"),
            **dict(zip(("pct_fma", "pct_memory_bound"), rate_percentages(record))),
        })
    numeric = ("map_ms", "wrong_rows", "pct_fma", "pct_memory_bound", "c_in", "c_out", "stride", "level", "inputs",
               "outputs", "pairs")
    frame = tables.long_frame(rows, CASE_KEYS, numeric, what="conv")
    frame["variant"] = frame["variant"].fillna("")
    frame["voxel_size"] = frame["voxel_size"].fillna(-1.0)
    frame = add_speedups(frame, CASE_KEYS)  # the best baseline per case, intervals and verdicts
    return frame[[*COLUMNS, *INTERVAL_COLUMNS, "samples_s"]]


def _scan(row) -> str:
    return row["cloud"] if row["voxel_size"] < 0 else f"{row['cloud']} @ {row['voxel_size']:g} m"


def _contenders(frame: pd.DataFrame) -> list[str]:
    names = [c for c in dict.fromkeys(frame["contender"]) if c != ALL]
    return sorted(names, key=lambda name: (not name.startswith(SPARSETIR), names.index(name)))


def ms_table(frame: pd.DataFrame, case: str) -> pd.DataFrame:
    """(scan, layer) x contender: median ms ("wrong"/"unavailable"/"failed" where not timed)."""
    mine = frame[frame["case"] == case]
    contenders = [c for c in _contenders(frame) if c in set(mine["contender"])]
    rows = []
    for _, group in mine.groupby(CASE_KEYS, sort=False):
        first = group.iloc[0]
        cells = group.set_index("contender")
        row = {"scan": _scan(first), "layer": first["layer"], "pairs": number_cell(first["pairs"], 0)}
        for contender in contenders:
            if contender not in cells.index:
                row[contender] = "—"
                continue
            entry = cells.loc[contender]
            row[contender] = number_cell(entry["median_ms"], 3) if entry["status"] == "ok" else entry["status"]
        rows.append(row)
    return pd.DataFrame(rows, columns=["scan", "layer", "pairs", *contenders])


def speedup_table(frame: pd.DataFrame, case: str) -> tuple[pd.DataFrame, list[str]]:
    """Per sparsetir contender and case: its ms, the best baseline, the speedups; a geomean/min row each; and
    one verdict line per sparsetir contender against the target (per-layer cases only)."""
    rows, verdicts = [], []
    mine = frame[frame["case"] == case]
    for contender in [c for c in _contenders(mine) if mine.loc[mine["contender"] == c, "kind"].eq(SPARSETIR).any()]:
        entries = mine[mine["contender"] == contender]
        speedups = []
        for _, entry in entries.iterrows():
            speedups.append(entry["speedup_vs_best_baseline"])
            rows.append({"sparsetir": contender, "scan": _scan(entry), "layer": entry["layer"], **tables.speedup_cells(entry),
                         "compile s": number_cell(entry["compile_s"]), "tune s": number_cell(entry["tune_s"], 1)})
        valid = [s for s in speedups if s is not None and math.isfinite(s)]
        if valid:
            rows.append({"sparsetir": contender, "scan": "geomean", "layer": f"min {min(valid):.2f}",
                         **tables.geomean_cells(valid, entries["speedup_vs_best_baseline_mean"]),
                         "compile s": "", "tune s": ""})
            if case == "layer":
                met = geomean(valid) >= TARGET_GEOMEAN and min(valid) >= TARGET_MIN and len(valid) == len(speedups)
                verdicts.append(f"- **{contender}**: geomean {geomean(valid):.2f}x, minimum {min(valid):.2f}x over "
                                f"{len(valid)} of {len(speedups)} layers — target (geomean >= {TARGET_GEOMEAN}x, none "
                                f"below {TARGET_MIN}x) {'met' if met else 'NOT met'}")
                verdicts.append(_fma_verdict(contender, entries))
            else:
                met = min(valid) >= TARGET_NETWORK and len(valid) == len(speedups)
                verdicts.append(f"- **{contender}**: the network at {min(valid):.2f}x over its best baseline "
                                f"(lowest of {len(valid)}) — target (>= {TARGET_NETWORK}x) {'met' if met else 'NOT met'}")
    return pd.DataFrame(rows), verdicts


def _fma_verdict(contender: str, entries: pd.DataFrame) -> str:
    """The compute-bound target: every timed layer with >= TARGET_FMA_CHANNELS input channels at >= TARGET_FMA_PCT%
    of the measured FMA rate."""
    wide = entries[(entries["c_in"] >= TARGET_FMA_CHANNELS) & entries["pct_fma"].notna()]
    if wide.empty:
        return f"- **{contender}**: no timed layer with >= {TARGET_FMA_CHANNELS} input channels and a measured FMA rate"
    low = float(wide["pct_fma"].min())
    met = low >= TARGET_FMA_PCT
    return (f"- **{contender}**: {len(wide)} layer(s) with >= {TARGET_FMA_CHANNELS} input channels at "
            f"{low:.1f}–{float(wide['pct_fma'].max()):.1f}% of the measured FMA rate — target (>= {TARGET_FMA_PCT:g}%) "
            f"{'met' if met else 'NOT met'}")


def map_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Per layer: kernel-map building ms of sparsetir and of spconv, and their ratio; plus a verdict line."""
    rows, ratios = [], []
    for _, group in frame[frame["case"] == "layer"].groupby(CASE_KEYS, sort=False):
        ours = group.loc[group["map_library"] == "sparsetir", "map_ms"].dropna()
        theirs = group.loc[group["map_library"] == "spconv", "map_ms"].dropna()
        first = group.iloc[0]
        ratio = theirs.iloc[0] / ours.iloc[0] if len(ours) and len(theirs) else math.nan
        ratios.append(ratio)
        rows.append({"scan": _scan(first), "layer": first["layer"], "pairs": number_cell(first["pairs"], 0),
                     "sparsetir map ms": number_cell(ours.iloc[0] if len(ours) else None),
                     "spconv map ms": number_cell(theirs.iloc[0] if len(theirs) else None),
                     "spconv / sparsetir": number_cell(ratio)})
    valid = [r for r in ratios if math.isfinite(r)]
    verdict = (f"Kernel-map building: sparsetir is {geomean(valid):.2f}x spconv's speed (geomean; minimum "
               f"{min(valid):.2f}x); no slower than spconv on {sum(r >= 1.0 for r in valid)} of {len(valid)} "
               f"layers — target {'met' if min(valid) >= 1.0 else 'NOT met'}" if valid else
               "Kernel-map building: no spconv rules were timed.")
    return pd.DataFrame(rows), verdict


def not_run(frame: pd.DataFrame) -> pd.DataFrame:
    failed = frame[frame["status"] != "ok"]
    return failed[["cloud", "voxel_size", "case", "layer", "contender", "status", "reason"]].drop_duplicates(
        subset=["contender", "status", "reason"])


def write_tables(frame: pd.DataFrame, csv: Path, md: Path, tex: Path, interference: str = "") -> None:
    """The three tables; ``interference``: the paragraph ``speedup.md`` ends with (``interference_paragraph``)."""

    write_bytes_atomic(csv, frame.drop(columns=["samples_s"], errors="ignore").to_csv(index=False).encode())
    layers = ms_table(frame, "layer")
    speedups, verdicts = speedup_table(frame, "layer")
    maps, map_verdict = map_table(frame)
    network = ms_table(frame, "network")
    network_speedups, network_verdicts = speedup_table(frame, "network")
    parts = ["# Sparse 3-D convolution (CPU)", "",
             "Milliseconds per call (median) per layer; every contender was checked against a float64 reference "
             "before it was timed (a wrong one is not timed: its cell says so). Speedups are over the fastest timed "
             "baseline of each layer (spconv with all threads or one, plain torch gather-mm-scatter). Kernel maps "
             "are set-up, timed on their own (below), not part of the kernel times.", ""]
    parts += ["## Headline", "", "Per sparsetir contender: the geometric mean of its speedups over the best baseline "
              "with its 90% bootstrap interval over the interleaved rounds, and its wins / ties / losses (a tie: the "
              "interval straddles 1).", "", headline_table(frame, CASE_KEYS).to_markdown(index=False), ""]
    if not layers.empty:
        parts += ["## Per layer (ms, median)", "", layers.to_markdown(index=False), ""]
    if not speedups.empty:
        parts += ["## sparsetir over the best baseline, per layer", "", speedups.to_markdown(index=False), "",
                  *verdicts, ""]
    if not maps.empty:
        parts += ["## Kernel-map building (ms, median)", "", maps.to_markdown(index=False), "", map_verdict, ""]
    if not network.empty:
        parts += ["## End to end (the network, ms per call, median)", "", network.to_markdown(index=False), ""]
        if not network_speedups.empty:
            parts += [network_speedups.to_markdown(index=False), "", *network_verdicts, ""]
    missing = not_run(frame)
    if not missing.empty:
        parts += ["## Not run", "", missing.to_markdown(index=False), ""]
    write_bytes_atomic(md, ("\n".join(parts) + interference).encode())
    write_bytes_atomic(tex, (layers if not layers.empty else network).to_latex(index=False).encode())


def workflow_tables(records: list[Path], outputs: dict, settings: dict) -> pd.DataFrame:
    """The tables of the records files ``records`` (the workflow's tables job)."""

    records = read_records(records)
    frame = conv_frame(records)
    write_tables(frame, outputs["csv"], outputs["md"], outputs["tex"], interference_paragraph(records))
    return frame


# ------------------------------------------------------------ figures

SPARSETIR = "sparsetir"


def _save(figure, path: Path) -> None:
    """Render to memory, then write atomically."""

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(figure)
    write_bytes_atomic(path, buffer.getvalue())


def _label(row) -> str:
    scan = "" if row["voxel_size"] < 0 else f"{row['voxel_size']:g} m "
    return f"{scan}{'network' if row['case'] == 'network' else row['layer']}"


def _panel(axis, data: pd.DataFrame, y: str, hue: str, ylabel: str, title: str, empty: str) -> None:
    """Bars of ``y`` per case label on a linear axis from 0 (bar heights compare as the values do)."""
    if data.empty:
        axis.axis("off")
        axis.text(0.5, 0.5, empty, ha="center", va="center")
        return
    sns.barplot(data=data, x="label", y=y, hue=hue, ax=axis)
    axis.set_ylim(bottom=0)
    axis.set_ylabel(ylabel)
    axis.set_xlabel("")
    axis.set_title(title)
    axis.tick_params(axis="x", rotation=45)
    for label in axis.get_xticklabels():
        label.set_horizontalalignment("right")


def conv_figure(frame: pd.DataFrame, path: Path) -> None:
    """Speedups per case and map-building times (see the module docstring)."""
    frame = frame.copy()
    frame["label"] = frame.apply(_label, axis=1)
    ours = frame[(frame["kind"] == SPARSETIR) & frame["speedup_vs_best_baseline"].notna()]
    maps = frame[(frame["case"] == "layer") & frame["map_library"].notna() & frame["map_ms"].notna()]
    maps = maps.drop_duplicates(subset=["label", "map_library"])
    figure, axes = plt.subplots(1, 2, figsize=(max(10, 0.9 * frame["label"].nunique() + 6), 4.4))
    _panel(axes[0], ours, "speedup_vs_best_baseline", "contender", "speedup over the best baseline (median)",
           "sparse conv: sparsetir over spconv / torch", "no sparsetir contender was timed against a baseline")
    if not ours.empty:
        axes[0].axhline(1.0, color="black", linewidth=0.8)
        axes[0].axhline(TARGET_GEOMEAN, color="tab:red", linewidth=0.8, linestyle="--",
                        label=f"target {TARGET_GEOMEAN:g}x")
    _panel(axes[1], maps, "map_ms", "map_library", "kernel-map building, ms (median)",
           "kernel maps: sparsetir against spconv's rules", "no kernel map was timed")
    figure.tight_layout()

    failed = frame[frame["contender"] == "*"]
    not_run_note(figure, [f"{_label(row)} ({row['reason']})" for _, row in failed.iterrows()])
    _save(figure, path)


def workflow_figures(csv: Path, outputs: dict) -> None:
    """The figure of ``speedup.csv`` (the workflow's figures job)."""
    conv_figure(pd.read_csv(csv), outputs["figure"])
