"""Workflow step: ``report.md`` and ``report.html`` over every experiment's ``summary.json``
(``sparsetir.bench.report.document``)."""

from pathlib import Path

if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        from sparsetir.bench.report.document import write_report
        from sparsetir.bench.report.summary import read_summary

        paths = list(snakemake.input.summaries)
        gpu = any(row.get("device") == "cuda" for path in paths for row in read_summary(path)["headline"])
        write_report(snakemake.params.results, paths, Path(snakemake.output.md).with_suffix(""),
                     config_hash=snakemake.params.config_hash, gpu_records=gpu)
