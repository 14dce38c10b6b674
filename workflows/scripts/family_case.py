"""Workflow step: one job of an experiment family (``workflows/rules/families.smk``); one records file.

The family comes from the harness's registry (``sparsetir.bench.families``), and its declaration says
what the job runs (``snakemake.params.step``):

- ``case``: one case (``Family.workflow_case``, the case's keywords from ``Family.workflow_cases``),
  unless no data route provides its data (``Family.workflow_unavailable``: its records say so without
  loading torch or TVM). Every contender is checked against the float64 reference before timing,
  and the correct ones are timed interleaved;
- ``extra``: a job beside the cases (``Family.workflow_extra``), timed the same way;
- ``finish``: the one-thread step after a case (``Family.workflow_finish``) on the case's records.

Data routes, spin limits and thread counts are set before torch or TVM load; the records file is
written atomically, a timed job's in the worker processes the timing policy asks for
(``case_workers.run_step``) where the family runs its cases there (``Family.case_in_workers``).

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


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(*, family: str, case: dict | None, output: Path, settings: dict, data: dict, device: str, seed: int,
         threads: int, timing: dict | None = None, extra: str | None = None) -> list[dict]:
    """Run ``case`` of ``family`` (or its extra job ``extra``) with its config section ``settings``; the
    section's ``timing`` (else the config's top-level ``timing``) is the policy."""
    from prepare_dataset import configure_data_routes

    from sparsetir.bench.families import family as registered
    from sparsetir.bench.records import write_json_atomic
    from sparsetir.bench.threads import configure_threads

    configure_data_routes(data)
    declared = registered(family)
    records = None if extra is not None else declared.workflow_unavailable(case, settings)
    if records is not None:  # no route provides its data: say so without loading torch or TVM
        _say(f"{family} {case}: {records[0]['reason']}")
        write_json_atomic(output, records)
        return records
    for warning in configure_threads(threads):  # spin limits and threads, before torch/TVM load
        _say(warning)
    import torch

    torch.set_num_threads(threads)
    from sparsetir.timing import DEFAULT, TimingPolicy

    policy = TimingPolicy.from_mapping(settings.get("timing") or timing, base=DEFAULT)
    if extra is not None:
        records = declared.workflow_extra(extra, settings, timing=policy, device=device, seed=seed, threads=threads,
                                          say=_say)
    else:
        records = declared.workflow_case(case, settings, timing=policy, device=device, seed=seed, threads=threads,
                                         say=_say)
    write_json_atomic(output, records)
    return records


def finish(*, family: str, timed: Path, output: Path, settings: dict, data: dict) -> list[dict]:
    """The family's finish step (``Family.workflow_finish``) on the records of one case."""
    from prepare_dataset import configure_data_routes

    from sparsetir.bench.families import family as registered
    from sparsetir.bench.records import read_records, write_json_atomic

    configure_data_routes(data)
    records = registered(family).workflow_finish(read_records([timed]), settings)
    write_json_atomic(output, records)
    return records


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from case_workers import run_step
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        params = snakemake.params
        if params.step == "finish":
            finish(family=params.family, timed=Path(snakemake.input[0]), output=Path(snakemake.output[0]),
                   settings=params.settings, data=params.data)
        else:
            from sparsetir.bench.families import family as registered

            kwargs = dict(family=params.family, case=dict(params.case) if params.step == "case" else None,
                          extra=params.get("extra"), settings=params.settings, data=params.data,
                          device=params.device, seed=params.seed, threads=snakemake.threads, timing=params.timing)
            if registered(params.family).case_in_workers:
                run_step(__file__, main, kwargs, output=Path(snakemake.output[0]),
                         timing=params.settings.get("timing") or params.timing)
            else:
                main(**kwargs, output=Path(snakemake.output[0]))
