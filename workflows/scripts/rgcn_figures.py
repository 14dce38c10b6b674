"""Workflow step: the R-GCN figure (seaborn), from ``speedup.csv`` (``rgcn_tables.py``).

``rgcn_inference.png`` (and ``.svg``) has two panels, one bar per (dataset, contender): milliseconds per
inference (median, linear axis from 0, each sparsetir contender's speedup over the best baseline written
above its bar) and peak memory (MiB). Contenders that did not run have no bar (the tables say why); datasets that
did not run are named under the axes.
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
    from sparsetir.bench.report.figures import not_run_note

    missing = [f"{d} ({r})" for d, r in frame[frame["contender"] == "*"][["dataset", "reason"]].values]
    not_run_note(figure, missing)
    _save(figure, path)


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        inference_figure(pd.read_csv(snakemake.input[0]), Path(snakemake.output[0]))
