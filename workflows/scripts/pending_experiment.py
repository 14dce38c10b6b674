"""Workflow step for experiments that later issues fill: tables that say "not implemented yet".

No numbers are written, so nothing can be mistaken for a result.
"""


from pathlib import Path

DESCRIPTIONS = {
    "attention": "block-sparse attention (BSR block 16, seq 4096, 12 heads, head dim 64, fp16) vs Triton blocksparse",
    "conv": "sparse convolution (KITTI point clouds) vs TorchSparse",
    "rgcn": "RGCN inference (AIFB, MUTAG, BGS, AM, ogbl-biokg) vs PyG, DGL and Graphiler",
    "sage": "GraphSAGE training (3 layers, hidden 128) vs DGL",
    "gat": "GAT training (2 layers, 8 heads of 8) vs PyG and DGL GATConv",
}
STATUS = "not implemented yet"


def write_pending_tables(experiment: str, csv: Path, md: Path, tex: Path) -> None:
    """Write the three tables of a not-yet-implemented experiment, each saying so."""
    if experiment not in DESCRIPTIONS:
        raise ValueError(f"unknown pending experiment {experiment!r}; expected one of {', '.join(DESCRIPTIONS)}")
    from sparsetir.bench.records import write_text_atomic

    what = DESCRIPTIONS[experiment]
    write_text_atomic(csv, f"experiment,status,description\n{experiment},{STATUS},\"{what}\"\n")
    write_text_atomic(md, f"# {experiment}: {STATUS}\n\n| experiment | status |\n|---|---|\n| {what} | {STATUS} |\n")
    write_text_atomic(
        tex,
        "\\begin{tabular}{ll}\n\\toprule\nexperiment & status \\\\\n\\midrule\n"
        f"{experiment} & {STATUS} \\\\\n\\bottomrule\n\\end{{tabular}}\n"
    )


def write_pending_summary(experiment: str, path: Path) -> None:
    """The experiment's summary.json: no numbers, one pending row saying why."""
    from sparsetir.bench.report.summary import make_summary, pending_row, write_summary

    write_summary(path, make_summary(experiment, DESCRIPTIONS[experiment], headline=[], cases=[],
                                     pending=[pending_row("every case", "*", "pending", STATUS)],
                                     tables=["speedup.md"], figures=[], caption={}))


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        write_pending_tables(snakemake.wildcards.pending, snakemake.output.csv, snakemake.output.md,
                             snakemake.output.tex)
        write_pending_summary(snakemake.wildcards.pending, snakemake.output.summary)
