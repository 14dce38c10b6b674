"""Workflow step: R-GCN inference on one dataset, every contender timed; one records file.

``sparsetir.bench.families.rgcn.benchmark_dataset`` does the work: the inputs are built once, every
contender (the configured sparsetir formats, the configured baselines of ``baselines/rgcn.py``)
is checked against the float64 reference before timing, and the correct ones are timed
interleaved. Their peak memory is the next step's (``rgcn_memory.py``). A dataset no route
provides gives one ``unavailable`` record. Spin limits and thread counts are set before torch
or TVM load.

:func:`check_rgcn_config` is what the rules file (``rules/families/rgcn.smk``) checks before any
job: the schema cannot know which datasets are relational graphs or which baselines exist.
"""


import sys
from pathlib import Path


def check_rgcn_config(section: dict) -> dict:
    """Check the config's ``rgcn`` section (datasets, dims, contenders); return it or raise ``ValueError``."""
    from sparsetir.bench.families.rgcn import check_dims
    from sparsetir.data.random_relational import check_relational_name

    for name in section["datasets"]:
        try:
            check_relational_name(name)
        except ValueError as error:
            raise ValueError(f"config rgcn.datasets: {error}") from None
    try:
        check_dims(section["dims"])
    except ValueError as error:
        raise ValueError(f"config rgcn.dims: {error}") from None
    from harness_config import check_contenders

    check_contenders("rgcn", "rgms", section)
    return section


def main(*, dataset: str, output: Path, settings: dict, data: dict, seed: int, threads: int,
         timing: dict | None = None) -> list[dict]:
    """Benchmark ``dataset`` with the ``rgcn`` section's contenders; its ``timing`` (else the config's
    top-level ``timing``) is the policy."""
    from prepare_dataset import configure_data_routes

    from sparsetir.bench.case_runner import unavailable_records
    from sparsetir.bench.records import write_json_atomic
    from sparsetir.bench.threads import configure_threads
    from sparsetir.data import load_relational
    from sparsetir.data.random_relational import parse_relational_spec

    configure_data_routes(data)
    if parse_relational_spec(dataset) is None:  # a graph no route provides: say so without loading torch or TVM
        try:
            load_relational(dataset)
        except (OSError, ValueError) as error:
            records = unavailable_records(experiment="rgcn", op="rgcn", dataset=dataset,
                                          feats=[int(settings["dims"][0])],
                                          reason=f"{type(error).__name__}: {error}")
            print(f"rgcn {dataset}: {records[0]['reason']}", file=sys.stderr)
            write_json_atomic(output, records)
            return records
    for warning in configure_threads(threads):  # spin limits and threads, before torch/TVM load
        print(warning, file=sys.stderr)
    import torch

    torch.set_num_threads(threads)
    from sparsetir.bench.families.rgcn import FAMILY, benchmark_dataset
    from sparsetir.timing import DEFAULT, TimingPolicy

    contenders = FAMILY.contenders(settings["sparsetir"], settings["baselines"],
                                   tune_budget_s=settings.get("tune_budget_s"))
    records = benchmark_dataset(dataset, contenders, dims=settings["dims"], seed=seed,
                                timing=TimingPolicy.from_mapping(settings.get("timing") or timing, base=DEFAULT),
                                memory=False, threads=threads, progress=lambda message: print(message, file=sys.stderr, flush=True))
    print(FAMILY.format_records(records), file=sys.stderr, flush=True)
    write_json_atomic(output, records)
    return records


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from case_workers import run_step
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        run_step(__file__, main, dict(
            dataset=snakemake.params.dataset, settings=snakemake.params.settings, data=snakemake.params.data,
            seed=snakemake.params.seed, threads=snakemake.threads, timing=snakemake.params.timing),
            output=Path(snakemake.output[0]), timing=snakemake.params.settings.get("timing") or snakemake.params.timing)
