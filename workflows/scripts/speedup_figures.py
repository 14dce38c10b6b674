"""Workflow step: the figures of one experiment (seaborn), from its ``speedup.csv``.

- ``speedup_bars.png``: grouped bars in the style of the paper: speedup over the reference per
  dataset, one bar per feature size, one panel per sparsetir contender (and device), log
  scale, a line at 1 and the geometric mean over all cases annotated.
- ``roofline.png``: achieved bandwidth (min-bytes model, GB/s) against arithmetic intensity
  (flops per minimum byte) for every timed contender, with the copy bandwidth measured in the
  same run as the roof.
"""


import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from speedup_tables import geomean  # noqa: E402

SPARSETIR_PREFIX = "sparsetir"


def _save(figure, path: Path) -> None:
    """Render to memory, then write atomically."""
    from sparsetir.bench.records import write_bytes_atomic

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(figure)
    write_bytes_atomic(path, buffer.getvalue())


def _message_figure(text: str):
    figure, axis = plt.subplots(figsize=(6, 2))
    axis.axis("off")
    axis.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return figure


def bar_figure(frame: pd.DataFrame, path: Path, experiment: str = "") -> None:
    """Grouped speedup bars of the sparsetir contenders (see the module docstring)."""
    timed = frame[(frame["status"] == "ok") & frame["contender"].str.startswith(SPARSETIR_PREFIX)
                  & np.isfinite(frame["speedup_vs_reference"])].copy()
    if timed.empty:
        _save(_message_figure(f"{experiment}: no sparsetir contender was timed against a reference"), path)
        return
    timed["panel"] = timed["contender"] + " (" + timed["device"] + ", vs " + timed["reference"].fillna("?") + ")"
    timed.loc[timed["device"] == "cpu", "panel"] = timed["contender"] + " (cpu)"
    panels = list(dict.fromkeys(timed["panel"]))
    figure, axes = plt.subplots(len(panels), 1, figsize=(max(6, 0.9 * timed["dataset"].nunique() + 3), 3.2 * len(panels)),
                                squeeze=False)
    for axis, panel in zip(axes[:, 0], panels):
        mine = timed[timed["panel"] == panel]
        sns.barplot(data=mine, x="dataset", y="speedup_vs_reference", hue="feat", ax=axis, palette="viridis")
        axis.set_yscale("log")
        axis.axhline(1.0, color="black", linewidth=0.8)
        mean = geomean(mine["speedup_vs_reference"])
        axis.axhline(mean, color="tab:red", linestyle="--", linewidth=1)
        axis.set_title(f"{experiment} {panel}: geomean {mean:.2f}x over {len(mine)} cases")
        reference = "best CPU library" if (mine["device"] == "cpu").all() else "reference"
        axis.set_ylabel(f"speedup over {reference}")
        axis.set_xlabel("")
        axis.tick_params(axis="x", rotation=30)
        axis.legend(title="feature size", fontsize="small", ncol=min(5, mine["feat"].nunique()))
    figure.tight_layout()
    _save(figure, path)


def roofline_figure(frame: pd.DataFrame, path: Path, experiment: str = "") -> None:
    """Achieved GB/s against arithmetic intensity, with the measured copy bandwidth as the roof."""
    timed = frame[(frame["status"] == "ok") & np.isfinite(frame["gbytes_per_s"])].copy()
    if timed.empty:
        _save(_message_figure(f"{experiment}: nothing was timed"), path)
        return
    timed["intensity"] = timed["flops"] / timed["min_bytes"]
    figure, axis = plt.subplots(figsize=(7, 4.5))
    sns.scatterplot(data=timed, x="intensity", y="gbytes_per_s", hue="contender", style="device", ax=axis, s=30)
    for device, rows in timed.groupby("device"):
        roof = rows["copy_bytes_per_s"].median() / 1e9
        axis.axhline(roof, linestyle="--", color="gray", linewidth=1)
        axis.text(timed["intensity"].min(), roof, f" copy bandwidth ({device}) {roof:.1f} GB/s", va="bottom",
                  fontsize="small")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("arithmetic intensity (flop per minimum byte)")
    axis.set_ylabel("achieved GB/s (min-bytes model)")
    axis.set_title(f"{experiment}: achieved bandwidth")
    axis.legend(fontsize="x-small", bbox_to_anchor=(1.02, 1), loc="upper left")
    figure.tight_layout()
    _save(figure, path)


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        table = pd.read_csv(snakemake.input[0])
        bar_figure(table, Path(snakemake.output.bars), snakemake.wildcards.experiment)
        roofline_figure(table, Path(snakemake.output.roofline), snakemake.wildcards.experiment)
