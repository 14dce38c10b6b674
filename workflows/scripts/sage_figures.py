"""Workflow step: the GraphSAGE training figures (seaborn), from ``sage/speedup.csv``.

- ``epoch_time.png`` (and ``.svg``): ms per epoch per graph, one bar per contender, one panel per mode (linear
  axis from 0; graphs that did not train are named under it).
- ``accuracy_vs_time.png`` (and ``.svg``): test accuracy (mean, with the standard deviation over seeds as error
  bars) against ms per epoch, for every contender on the labelled graphs.
"""


from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from sparsetir.bench.report import style  # noqa: E402


def _save(figure, path: Path) -> None:
    """PNG and SVG, atomically (``sparsetir.bench.report.style``)."""
    style.save_figure(figure, path)


def epoch_time_figure(frame: pd.DataFrame, path: Path) -> None:
    """ms per epoch per graph and contender, one panel per mode, on a linear axis from 0."""
    from sparsetir.bench.report.figures import time_figure

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


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        table = pd.read_csv(snakemake.input[0])
        epoch_time_figure(table, Path(snakemake.output.epoch_time))
        accuracy_figure(table, Path(snakemake.output.accuracy))
