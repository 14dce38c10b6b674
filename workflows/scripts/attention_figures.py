"""Workflow step: the attention figures, from ``speedup.csv`` (``attention_tables.py``).

``attention_speedup.png`` (and ``.svg``): each sparsetir contender's speedup over the case's reference per case
(mask and sequence length), the ratio of medians with its 90% interval (``sparsetir.bench.report.figures``).
``prunedbert_speedup.png``: the same for PrunedBERT's pruned weights (reference: dense MKL).
Cases that did not run keep an empty slot, named under the axes; the tables say why.
"""


from pathlib import Path

import pandas as pd


def speedup_figure(frame: pd.DataFrame, path: Path, title: str) -> None:
    """Each sparsetir contender's speedup over the case's reference (ratio of medians, 90% interval)."""
    from sparsetir.bench.report.figures import speedup_figure as draw

    draw(frame, path, case=["experiment", "case"], label=lambda row: str(row["case"]), title=title,
         column="speedup_vs_reference", versus="the reference")


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
