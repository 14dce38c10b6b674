"""Workflow step for experiments that later issues fill: tables that say "not implemented yet".

No numbers are written, so nothing can be mistaken for a result.
"""


from pathlib import Path


def descriptions() -> dict[str, str]:
    """Each registered family's one-line description (``Family.description``)."""
    from sparsetir.bench.families import families

    return {name: declared.description for name, declared in families().items()}


STATUS = "not implemented yet"


def write_pending_tables(experiment: str, csv: Path, md: Path, tex: Path) -> None:
    """Write the three tables of a not-yet-implemented experiment, each saying so."""
    known = descriptions()
    if experiment not in known:
        raise ValueError(f"unknown pending experiment {experiment!r}; expected one of {', '.join(known)}")
    from sparsetir.bench.records import write_text_atomic

    what = known[experiment]
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

    write_summary(path, make_summary(experiment, descriptions()[experiment], headline=[], cases=[],
                                     pending=[pending_row("every case", "*", "pending", STATUS)],
                                     tables=["speedup.md"], figures=[], caption={}))


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        write_pending_tables(snakemake.wildcards.pending, snakemake.output.csv, snakemake.output.md,
                             snakemake.output.tex)
        write_pending_summary(snakemake.wildcards.pending, snakemake.output.summary)
