"""Full-graph GAT training (a :class:`Family` declaration): the training loop is :mod:`sparsetir.bench.gat`.

    python -m sparsetir.bench gat --dataset cora [--samples 10] [--json out.json]
"""

from __future__ import annotations

from ..family import Family, register
from ..gat import (
    DEFAULT_DATASETS,
    EXPERIMENT,
    GATSettings,
    benchmark_gat_training,
    check_gat_dataset,
    gat_contenders,
    summary,
)
from ..training import TRAINING_POLICY, Trainer

__all__ = ["FAMILY"]


class GAT(Family):
    """Full-graph GAT training: trained, scored, then one epoch timed interleaved (``bench.gat``)."""

    name = op = EXPERIMENT
    title = "GAT training"
    description = "GAT training (2 layers, 8 heads of 8) vs PyG and DGL GATConv"
    workflow = "training"  # training.smk's rules over the config section
    trainer = Trainer(EXPERIMENT, "GAT training (2 GATConv layers, 8 heads of 8)", benchmark_gat_training,
                      GATSettings, gat_contenders, summary, check_gat_dataset)

    def contenders(self, sparsetir_formats=(None,), baselines=None, **_):
        """sparsetir and the declared GAT baselines (``bench.gat.gat_contenders``)."""
        return gat_contenders(baselines)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dataset", action="append", help=f"a graph (default: {', '.join(DEFAULT_DATASETS)})")
        parser.add_argument("--epochs", type=int, default=GATSettings.epochs, help="epochs before the accuracy")
        parser.set_defaults(samples=10)

    def cli_cases(self, args, timing, contenders, say):
        settings = GATSettings(epochs=args.epochs, seed=args.seed)
        policy = TRAINING_POLICY.replace(samples=args.samples,
                                         min_samples=min(args.samples, TRAINING_POLICY.min_samples))
        for dataset in args.dataset or DEFAULT_DATASETS:
            yield dataset, lambda dataset=dataset: benchmark_gat_training(dataset, settings, contenders=contenders,
                                                                         policy=policy, log=say)

    def format_records(self, records) -> str:
        return summary(records)

    def headline_text(self, records) -> str:
        return ""


FAMILY = register(GAT())
