"""Workflow step: ingest a GPU run's records (``sparsetir.tune.bundle_ingest.ingest``); write a summary."""


def main(records: str, reference_dir: str, output: str) -> list[dict]:
    from sparsetir.bench.records import write_json_atomic
    from sparsetir.tune.bundle_ingest import ingest

    added = ingest(records, reference_dir=reference_dir)
    write_json_atomic(output, {"records": records, "reference_dir": reference_dir, "database_entries": [
        {key: entry[key] for key in ("dataset", "config", "median_s", "device", "key_hash")} for entry in added]})
    return added


if "snakemake" in globals():
    main(snakemake.input.records, snakemake.params.reference_dir, snakemake.output[0])
