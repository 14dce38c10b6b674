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


def conv_figure(frame: pd.DataFrame, path: Path) -> None:
    """Speedups per case and map-building times (see the module docstring)."""
    frame = frame.copy()
    frame["label"] = frame.apply(_label, axis=1)
    ours = frame[(frame["kind"] == SPARSETIR) & frame["speedup_vs_best_baseline"].notna()]
    maps = frame[(frame["case"] == "layer") & frame["map_library"].notna() & frame["map_ms"].notna()]
    maps = maps.drop_duplicates(subset=["label", "map_library"])
    figure, axes = plt.subplots(1, 2, figsize=(max(10, 0.9 * frame["label"].nunique() + 6), 4.4))
    if ours.empty:
        axes[0].axis("off")
        axes[0].text(0.5, 0.5, "no sparsetir contender was timed against a baseline", ha="center", va="center")
    else:
        sns.barplot(data=ours, x="label", y="speedup_vs_best_baseline", hue="contender", ax=axes[0])
        axes[0].axhline(1.0, color="black", linewidth=0.8)
        axes[0].axhline(1.5, color="tab:red", linewidth=0.8, linestyle="--", label="target 1.5x")
        axes[0].set_ylabel("speedup over the best baseline (median)")
        axes[0].set_xlabel("")
        axes[0].set_title("sparse conv: sparsetir over spconv / torch")
        axes[0].tick_params(axis="x", rotation=45)
        for label in axes[0].get_xticklabels():
            label.set_horizontalalignment("right")
    if maps.empty:
        axes[1].axis("off")
        axes[1].text(0.5, 0.5, "no kernel map was timed", ha="center", va="center")
    else:
        sns.barplot(data=maps, x="label", y="map_ms", hue="map_library", ax=axes[1])
        axes[1].set_ylim(bottom=0)  # a linear axis from 0: bar heights compare as the times do
        axes[1].set_ylabel("kernel-map building, ms (median)")
        axes[1].set_xlabel("")
        axes[1].set_title("kernel maps: sparsetir against spconv's rules")
        axes[1].tick_params(axis="x", rotation=45)
        for label in axes[1].get_xticklabels():
            label.set_horizontalalignment("right")
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
