"""Workflow step: one case of an experiment family, every contender checked and timed; one records file.

The family comes from the harness's registry (``sparsetir.bench.families``): its declaration says what
a case runs (``Family.workflow_case``: attention a sequence length over every mask, conv a voxelised
cloud's layers and network, rgcn one graph), and which cases no data route provides
(``Family.workflow_unavailable``: their records say so without loading torch or TVM). Every contender
is checked against the float64 reference before timing, and the correct ones are timed interleaved.
Data routes, spin limits and thread counts are set before torch or TVM load; the records file is
written atomically, in the worker processes the timing policy asks for (``case_workers.run_step``).

:func:`check_family_config` is what the rules check before any job: the family's own checks
(``Family.check_config``), then its explicit ``sparsetir`` formats against the format registry.
"""


import sys
from pathlib import Path


def check_family_config(name: str, section: dict) -> dict:
    """Check the config's section of family ``name``; return it or raise ``ValueError``."""
    from harness_config import check_contenders

    from sparsetir.bench.families import family

    declared = family(name)
    declared.check_config(section)
    if declared.config_op is not None:
        check_contenders(name, declared.config_op, section)
    return section


def main(*, family: str, case: dict, output: Path, settings: dict, data: dict, device: str, seed: int, threads: int,
         timing: dict | None = None) -> list[dict]:
    """Run ``case`` of ``family`` with its config section ``settings``; the section's ``timing`` (else the
    config's top-level ``timing``) is the policy."""
    from prepare_dataset import configure_data_routes

    from sparsetir.bench.families import family as registered
    from sparsetir.bench.records import write_json_atomic
    from sparsetir.bench.threads import configure_threads

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    configure_data_routes(data)
    declared = registered(family)
    records = declared.workflow_unavailable(case, settings)
    if records is not None:  # no route provides its data: say so without loading torch or TVM
        say(f"{family} {case}: {records[0]['reason']}")
        write_json_atomic(output, records)
        return records
    for warning in configure_threads(threads):  # spin limits and threads, before torch/TVM load
        say(warning)
    import torch

    torch.set_num_threads(threads)
    from sparsetir.timing import DEFAULT, TimingPolicy

    policy = TimingPolicy.from_mapping(settings.get("timing") or timing, base=DEFAULT)
    records = declared.workflow_case(case, settings, timing=policy, device=device, seed=seed, threads=threads,
                                     say=say)
    write_json_atomic(output, records)
    return records


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from case_workers import run_step
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        params = snakemake.params
        run_step(__file__, main, dict(
            family=params.family, case=dict(params.case), settings=params.settings, data=params.data,
            device=params.device, seed=params.seed, threads=snakemake.threads, timing=params.timing),
            output=Path(snakemake.output[0]), timing=params.settings.get("timing") or params.timing)
