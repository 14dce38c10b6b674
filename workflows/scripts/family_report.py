"""Workflow step: an experiment family's tables or figures (``workflows/rules/families.smk``).

The family's report module (``Family.report_module()``: ``sparsetir.bench.report.families.<family>``)
writes them: ``workflow_tables(records, outputs, settings)`` turns the records files into ``speedup.csv``,
``speedup.md`` and ``speedup.tex`` (``settings``: the family's config section), and
``workflow_figures(csv, outputs)`` draws the family's declared figures (``Family.figures``) from
``speedup.csv``; ``outputs`` maps each output's name to its path.
"""

from pathlib import Path


def write(family: str, step: str, inputs, outputs: dict, settings: dict | None = None):
    from sparsetir.bench.families import family as registered

    module = registered(family).report_module()
    if step == "tables":
        return module.workflow_tables([Path(path) for path in inputs], outputs, settings or {})
    return module.workflow_figures(Path(inputs[0]), outputs)


if "snakemake" in globals():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        params = snakemake.params
        write(params.family, params.step, snakemake.input.records if params.step == "tables" else snakemake.input,
              {key: Path(value) for key, value in snakemake.output.items()}, params.get("settings"))
