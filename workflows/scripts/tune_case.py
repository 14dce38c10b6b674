"""Workflow step: tune sparsetir for one (experiment, dataset, feature size); write the outcome.

The tuner compiles candidates in worker processes and times them here, so the job takes all
cores (nothing else runs beside it). Its result also goes to the tuning database in
``$SPARSETIR_CACHE_DIR``, so a second run (or a deleted results folder) reuses it without tuning.
"""


import sys
from pathlib import Path


def main(*, dataset_json: Path, output: Path, experiment: str, feat: int, tuning: dict, threads: int) -> dict:
    import json

    from sparsetir.bench.records import write_json_atomic

    document = json.loads(dataset_json.read_text())
    if document["status"] != "ok":
        outcome = {"status": "unavailable", "reason": document["reason"]}
        write_json_atomic(output, outcome)
        return outcome

    from sparsetir.bench.threads import configure_threads

    for warning in configure_threads(threads):
        print(warning, file=sys.stderr)
    from run_case import load_prepared

    from sparsetir.tune import tune

    matrix = load_prepared(document)
    budget = tuning["budget_s"][experiment]
    try:
        result = tune(experiment, matrix, feat, budget_s=budget, trials=tuning.get("trials"),
                      workers=max(1, threads), seed=tuning.get("seed", 0))
    except Exception as error:  # the case's other contenders still run; the record says why
        outcome = {"status": "failed", "reason": f"{type(error).__name__}: {error}"[:400]}
    else:
        outcome = {"status": "ok", **result.to_dict()}
    write_json_atomic(output, outcome)
    return outcome


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        main(dataset_json=Path(snakemake.input[0]), output=Path(snakemake.output[0]),
             experiment=snakemake.wildcards.experiment, feat=int(snakemake.wildcards.feat),
             tuning=snakemake.params.tuning, threads=snakemake.threads)
