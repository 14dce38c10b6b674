"""Workflow step: the sparse-convolution figure (seaborn), from ``speedup.csv`` (``conv_tables.py``).

``conv_speedup.png`` has two panels: each sparsetir contender's speedup over the best baseline per
layer and for the end-to-end network (bars; lines at 1x and at the 1.5x target), and kernel-map
building per layer, sparsetir against spconv (ms, linear axis from 0). Cases or contenders that did not run
have no bar; the tables say why.
"""


import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

SPARSETIR = "sparsetir"


def _save(figure, path: Path) -> None:
    """Render to memory, then write atomically."""
    from sparsetir.bench.records import write_bytes_atomic

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
        axes[0].axhline(1.5, color="tab:red", linewidth=0.8, linestyle="--", label="target 1.5x")
    _panel(axes[1], maps, "map_ms", "map_library", "kernel-map building, ms (median)",
           "kernel maps: sparsetir against spconv's rules", "no kernel map was timed")
    figure.tight_layout()
    from sparsetir.bench.report.figures import not_run_note

    failed = frame[frame["contender"] == "*"]
    not_run_note(figure, [f"{_label(row)} ({row['reason']})" for _, row in failed.iterrows()])
    _save(figure, path)


def main(table: Path, output: Path) -> None:
    frame = pd.read_csv(table)
    conv_figure(frame, output)


if "snakemake" in globals():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        main(Path(snakemake.input[0]), Path(snakemake.output[0]))
