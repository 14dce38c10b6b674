"""Workflow step: the attention figures (seaborn), from ``speedup.csv`` (``attention_tables.py``).

``attention_speedup.png`` (and ``.svg``): ms per call per case (mask and sequence length), one bar per contender,
log scale, each sparsetir contender's speedup over the case's reference above its bar.
``prunedbert_speedup.png``: the same for PrunedBERT's pruned weights (reference: dense MKL).
Contenders that did not run have no bar; the tables say why.
"""


import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from sparsetir.bench.report import style  # noqa: E402

SPARSETIR = "sparsetir"


def _save(figure, path: Path) -> None:
    """PNG and SVG, atomically (``sparsetir.bench.report.style``)."""
    style.save_figure(figure, path)


def speedup_figure(frame: pd.DataFrame, path: Path, title: str) -> None:
    """Bars of ms per call (log) per case and contender, speedups over the reference written above."""
    timed = frame[(frame["status"] == "ok") & frame["median_ms"].notna()].copy()
    if timed.empty:
        _save(style.message_figure(f"{title}: nothing was timed"), path)
        return
    style.apply_style()
    order = list(dict.fromkeys(timed["contender"]))
    order = sorted(order, key=lambda name: (not name.startswith(SPARSETIR), order.index(name)))
    palette = {name: colour for name, (colour, _) in style.series_styles(order).items()}
    cases = list(dict.fromkeys(timed["case"]))
    figure, axis = plt.subplots(figsize=(max(8, 1.6 * len(cases) + 4), 4.5))
    bars = sns.barplot(data=timed, x="case", y="median_ms", hue="contender", hue_order=order, order=cases,
                       palette=palette, ax=axis)
    axis.set_yscale("log")
    style.plain_log_axis(axis, "y")
    axis.set_ylabel("ms per call (median, log)")
    axis.set_xlabel("")
    axis.set_title(title)
    axis.tick_params(axis="x", labelrotation=20)
    for container, contender in zip(bars.containers, order):
        if not contender.startswith(SPARSETIR):
            continue
        mine = timed[timed["contender"] == contender].set_index("case")["speedup_vs_reference"]
        labels = []
        for case in cases:
            value = mine.get(case, math.nan)
            labels.append(f"{value:.1f}x" if isinstance(value, float) and math.isfinite(value) else "")
        axis.bar_label(container, labels=labels[:len(container)], fontsize="x-small", padding=2)
    if axis.get_legend() is not None:
        axis.get_legend().remove()
    handles, labels = axis.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize="small",
                  bbox_to_anchor=(0.5, -0.12))
    figure.tight_layout()
    _save(figure, path)


def write_figures(csv: Path, attention_png: Path, prunedbert_png: Path) -> None:
    frame = pd.read_csv(csv)
    speedup_figure(frame[frame["experiment"] == "attention"], attention_png,
                   "block-sparse attention (speedup over the best of FlexAttention / SDPA-mask / torch BSR)")
    speedup_figure(frame[frame["experiment"] == "prunedbert"], prunedbert_png,
                   "PrunedBERT: pruned weight x activations (speedup over dense MKL)")


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        write_figures(Path(snakemake.input[0]), Path(snakemake.output.attention), Path(snakemake.output.prunedbert))
