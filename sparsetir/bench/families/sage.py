"""GraphSAGE training (a :class:`Family` declaration): the training loop is :mod:`sparsetir.bench.sage`.

    python -m sparsetir.bench sage --dataset cora --mode full --epochs 20 [--seeds 0 1] [--json out.json]
"""

from __future__ import annotations

from ..family import Family, register
from ..sage import EXPERIMENT, MODES, SageSettings, run_sage, summary

__all__ = ["CONTENDER_OPTIONS", "FAMILY"]

#: the sparsetir contenders the command line knows (``--contender``)
CONTENDER_OPTIONS = {"sparsetir": {}, "sparsetir-sparse-x": {"sparse_features": "auto"},
                     "sparsetir-compiled": {"compiled": True}}


class Sage(Family):
    """GraphSAGE training: a family timed by its own loop, epoch by epoch (``bench.sage``)."""

    name = op = EXPERIMENT
    title = "GraphSAGE training"

    def contenders(self, sparsetir_formats=(None,), baselines=None, **_):
        """The baseline names: the training loop builds its contenders itself."""
        return baselines

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dataset", action="append", required=True)
        parser.add_argument("--mode", action="append", choices=MODES)
        parser.add_argument("--seeds", type=int, nargs="+", help="one training run per seed (default: --seed)")
        parser.add_argument("--epochs", type=int, default=SageSettings.epochs)
        parser.add_argument("--warmup", type=int, default=SageSettings.warmup)
        parser.add_argument("--contender", action="append", choices=tuple(CONTENDER_OPTIONS),
                            help="default: sparsetir and sparsetir-sparse-x")

    def cli_cases(self, args, timing, contenders, say):
        ours = {name: CONTENDER_OPTIONS[name] for name in (args.contender or ["sparsetir", "sparsetir-sparse-x"])}
        settings = SageSettings(epochs=args.epochs, warmup=args.warmup)
        for dataset in args.dataset:
            for mode in args.mode or ["full"]:
                yield f"{dataset} ({mode})", lambda dataset=dataset, mode=mode: run_sage(
                    dataset, mode, settings, seeds=args.seeds or [args.seed], contenders=ours, baselines=contenders,
                    log=say)

    def format_records(self, records) -> str:
        return summary(records)

    def headline_text(self, records) -> str:
        return ""


FAMILY = register(Sage())
