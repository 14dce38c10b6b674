"""Workflow step: ingest a GPU run's records (``sparsetir.bench.bundle.ingest``); write a summary."""


def main(records: str, reference_dir: str, output: str) -> list[dict]:
    from sparsetir.bench.bundle import ingest
    from sparsetir.bench.records import write_json_atomic

    added = ingest(records, reference_dir=reference_dir)
    write_json_atomic(output, {"records": records, "reference_dir": reference_dir, "database_entries": [
        {key: entry[key] for key in ("dataset", "config", "median_s", "device", "key_hash")} for entry in added]})
    return added


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        main(snakemake.input.records, snakemake.params.reference_dir, snakemake.output[0])
