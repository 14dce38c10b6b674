"""Workflow step: the peak memory of every R-GCN contender that passed its check on one dataset.

Reads the timed records (``family_case.py``) and writes them again with ``record["memory"]``
filled in (``sparsetir.bench.memory.attach_memory``: a probe process builds the inputs, then
forks one child per contender, ``memory_jobs`` at a time). The children use the timed run's
thread count. The step itself times nothing, so it declares one thread and the memory steps of
two datasets may run side by side; with ``memory: false`` the records pass through unchanged.
"""


import sys
from pathlib import Path


def main(*, timed: Path, output: Path, settings: dict, data: dict) -> list[dict]:
    import json

    from prepare_dataset import configure_data_routes

    from sparsetir.bench.records import read_records, write_json_atomic

    records = read_records([timed])
    timed_records = [r for r in records if r["status"] == "ok"]
    if settings.get("memory", True) and timed_records:
        from sparsetir.bench.threads import configure_threads

        threads = int(timed_records[0]["provenance"].get("threads") or 1)
        configure_data_routes(data)
        configure_threads(threads)  # the probe host and its children, like the timed run
        from sparsetir.bench.families.rgcn import FAMILY
        from sparsetir.bench.memory import attach_memory

        contenders = FAMILY.contenders(settings["sparsetir"], settings["baselines"],
                                       tune_budget_s=settings.get("tune_budget_s"))
        first = timed_records[0]
        case = {"dataset": first["dataset"], "dims": first["rgcn"]["dims"], "seed": first["rgcn"]["seed"]}
        attach_memory(FAMILY.name, records, contenders, case, threads=threads, jobs=settings.get("memory_jobs", 1),
                      repeats=settings.get("memory_repeats", 1))
        for record in timed_records:
            print(f"{record['dataset']} {record['contender']}: {json.dumps(record['memory'])}", file=sys.stderr)
    write_json_atomic(output, records)
    return records


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        main(timed=Path(snakemake.input[0]), output=Path(snakemake.output[0]), settings=snakemake.params.settings,
             data=snakemake.params.data)
