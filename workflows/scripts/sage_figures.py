"""Workflow step: the GraphSAGE training figures (seaborn), from ``sage/speedup.csv``.

- ``epoch_time.png``: ms per epoch per graph, one bar per contender, one panel per mode (log scale).
- ``accuracy_vs_time.png``: test accuracy (mean, with the standard deviation over seeds as error
  bars) against ms per epoch, for every contender on the labelled graphs.
"""


import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


def _save(figure, path: Path) -> None:
    from sparsetir.bench.records import write_bytes_atomic

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(figure)
    write_bytes_atomic(path, buffer.getvalue())


def _message(text: str):
    figure, axis = plt.subplots(figsize=(6, 2))
    axis.axis("off")
    axis.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return figure


def epoch_time_figure(frame: pd.DataFrame, path: Path) -> None:
    timed = frame[(frame["status"] == "ok") & np.isfinite(frame["ms_per_epoch"])]
    if timed.empty:
        _save(_message("sage: no contender was timed"), path)
        return
    modes = list(dict.fromkeys(timed["mode"]))
    figure, axes = plt.subplots(1, len(modes), figsize=(max(6, 2.2 * timed["dataset"].nunique() + 3) * len(modes), 4),
                                squeeze=False)
    for axis, mode in zip(axes[0], modes):
        sns.barplot(data=timed[timed["mode"] == mode], x="dataset", y="ms_per_epoch", hue="contender", ax=axis)
        axis.set_yscale("log")
        axis.set_title(f"{mode}: ms per epoch (lower is better)")
        axis.set_xlabel("")
    _save(figure, path)


def accuracy_figure(frame: pd.DataFrame, path: Path) -> None:
    labelled = frame[(frame["status"] == "ok") & (frame["labelled"] == True)  # noqa: E712
                     & np.isfinite(frame["test_acc_mean"])]
    if labelled.empty:
        _save(_message("sage: no labelled graph was trained (time-only graphs carry no accuracy)"), path)
        return
    figure, axis = plt.subplots(figsize=(7, 4.5))
    sns.scatterplot(data=labelled, x="ms_per_epoch", y="test_acc_mean", hue="contender", style="dataset", s=70,
                    ax=axis)
    errors = labelled[np.isfinite(labelled["test_acc_std"])]
    if not errors.empty:
        axis.errorbar(errors["ms_per_epoch"], errors["test_acc_mean"], yerr=errors["test_acc_std"], fmt="none",
                      ecolor="grey", elinewidth=0.8, capsize=2)
    axis.set_xscale("log")
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
