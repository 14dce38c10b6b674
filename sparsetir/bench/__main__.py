"""One command line for every experiment family: ``python -m sparsetir.bench <family> [options]``.

    python -m sparsetir.bench <family> --help                      # the family's own options
    python -m sparsetir.bench <family> --format default --format auto  # its heuristic against the tuner's pick
    python -m sparsetir.bench <training> --dataset NAME [--epochs N]   # a training experiment a family declares

The options every family shares (contenders, timing, threads, seed, ``--json``) are parsed here;
a family adds its own (``Family.add_arguments``) and runs its cases (``Family.main``). Spin limits
and thread counts are set before torch or TVM load. The exit status is 0 when some contender ran.
A training experiment that a family declares (``Family.trainings``) runs through
``bench.training.training_main``: trained, scored, then epochs timed interleaved.
"""

from __future__ import annotations

import argparse
import sys

from ..runtime.loader import usable_cores
from .families import families, family, trainers
from .family import format_option
from .memory import PROBE_COMMAND, probe_host
from .records import write_json_atomic
from .threads import configure_threads


def parser_for(name: str) -> argparse.ArgumentParser:
    declared = family(name)
    parser = argparse.ArgumentParser(
        prog=f"python -m sparsetir.bench {name}", description=(type(declared).__doc__ or "").split("\n\n")[0],
        epilog=f"Every contender is checked against the float64 reference before timing; see the module docstring "
               f"of {type(declared).__module__}.")
    parser.add_argument("--format", action="append", dest="formats", metavar="FORMAT",
                        help="a sparsetir contender per format (repeatable): default (the heuristic, named sparsetir), "
                             "auto (tuned, sparsetir-auto) or an explicit format (sparsetir[FORMAT]); default: default")
    parser.add_argument("--tune-budget-s", type=float, default=None,
                        help=f"tuning seconds per kernel shape for --format auto (default "
                             f"{declared.default_tune_budget_s:g}; a tuning-database hit takes none)"
                        if declared.default_tune_budget_s else argparse.SUPPRESS)
    parser.add_argument("--baseline", action="append", dest="baselines", metavar="NAME",
                        help="only these declared baselines (repeatable; default all)")
    parser.add_argument("--exclude", action="append", default=[], metavar="CONTENDER", help="skip a contender")
    parser.add_argument("--samples", type=int, default=20, help="timed calls per contender")
    parser.add_argument("--max-time-s", type=float, default=10.0,
                        help="cap on the estimated sampling time per case (fewer samples)")
    parser.add_argument("--no-flush", action="store_true", help="do not flush the cache before each call")
    parser.add_argument("--threads", type=int, default=usable_cores(),
                        help="threads for torch and TVM (default: all usable cores)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs (default 0)")
    parser.add_argument("--json", help="write the records (a JSON list) to this file")
    declared.add_arguments(parser)
    return parser


def parse_args(name: str, argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed options of family ``name`` (``parser.error`` on a bad value: exit status 2)."""
    parser = parser_for(name)
    args = parser.parse_args(argv)
    args.formats = [format_option(f) for f in (args.formats or ["default"])]
    try:
        family(name).check_arguments(args)
    except ValueError as error:
        parser.error(str(error))
    return args


def _probe(argv: list[str]) -> int:
    """``memory-probe <family> --case JSON --spec JSON ...``: the host of ``bench.memory``'s probes."""
    import json  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=f"python -m sparsetir.bench {PROBE_COMMAND}", description=probe_host.__doc__)
    parser.add_argument("family")
    parser.add_argument("--case", required=True, help="the family's probe_inputs keyword arguments (JSON)")
    parser.add_argument("--spec", required=True, help="[[name, probe spec], ...] (JSON)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--timeout-s", type=float, default=600.0)
    args = parser.parse_args(argv)
    configure_threads(args.threads)  # before torch and TVM load
    return probe_host(family(args.family), case=json.loads(args.case), spec=json.loads(args.spec),
                      threads=args.threads, jobs=args.jobs, repeats=args.repeats, timeout_s=args.timeout_s)


def _train(name: str, argv: list[str]) -> int:
    """``<training> [options]``: a training experiment a family declares, through ``training_main``."""
    from .training import TRAINING_POLICY, training_main  # noqa: PLC0415

    trainer = trainers()[name]
    parser = argparse.ArgumentParser(prog=f"python -m sparsetir.bench {name}", description=trainer.title)
    parser.add_argument("--dataset", action="append",
                        help=f"a dataset (repeatable; default: {', '.join(trainer.datasets) or 'none'})")
    parser.add_argument("--baseline", action="append", metavar="NAME",
                        help="only these declared baselines or libraries (repeatable; default all)")
    parser.add_argument("--epochs", type=int, default=trainer.settings.epochs, help="epochs before the accuracy")
    parser.add_argument("--samples", type=int, default=TRAINING_POLICY.samples, help="timed epochs per contender")

    def run(dataset, args, policy, log):
        try:  # an unknown baseline: the usage error, before anything is built
            contenders = trainer.contenders(args.baseline)
        except ValueError as error:
            parser.error(str(error))
        settings = trainer.settings(epochs=args.epochs, seed=args.seed)
        return trainer.benchmark(dataset, settings, contenders=contenders, policy=policy, log=log)

    if not {"-h", "--help"} & set(argv):  # the datasets are checked before torch loads
        try:
            for dataset in parser.parse_known_args(argv)[0].dataset or trainer.datasets:
                trainer.check_dataset(dataset)
        except ValueError as error:
            parser.error(str(error))
    return training_main(parser, argv, list(trainer.datasets), run, trainer.summary)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [PROBE_COMMAND]:
        return _probe(argv[1:])
    known = families()
    training = {name: trainer for name, trainer in trainers().items() if name not in known}
    if argv[:1] and argv[0] in training:
        return _train(argv[0], argv[1:])
    if not argv or argv[0] not in known:
        print(f"usage: python -m sparsetir.bench {{{','.join([*known, *training])}}} [options]\n"
              f"  experiment families: {', '.join(f'{n} ({f.title})' for n, f in known.items())}\n"
              f"  training experiments: {', '.join(f'{n} ({t.title})' for n, t in training.items())}", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    name, rest = argv[0], argv[1:]
    declared = known[name]
    args = parse_args(name, rest)
    for warning in configure_threads(args.threads):  # before torch and TVM load
        print(warning, file=sys.stderr)
    import torch  # noqa: PLC0415 - after the thread settings

    torch.set_num_threads(args.threads)
    timing = declared.cli_timing(args)
    contenders = declared.contenders(args.formats, args.baselines, tune_budget_s=args.tune_budget_s,
                                     exclude=args.exclude)
    records = declared.main(args, timing, contenders, lambda message: print(message, file=sys.stderr, flush=True))
    print(declared.headline_text(records))
    if args.json:
        write_json_atomic(args.json, records)
    return 0 if any(record["status"] == "ok" for record in records) else 1


if __name__ == "__main__":
    sys.exit(main())
