"""R-GCN entity-classification training: sparsetir's ``nn.RGCN`` against PyG and DGL, epoch time and accuracy.

    python -m sparsetir.bench.rgcn_train --dataset aifb --dataset mutag [--samples 20] [--json out.json]

The model is PyG's ``examples/rgcn.py`` (Schlichtkrull et al.'s entity classification): two
R-GCN layers with basis decomposition (``bases``, 30) and mean aggregation, a featureless first
layer (``in_channels`` = the number of nodes, ``x=None``) to ``hidden`` (16) features, a ReLU, a
second layer to the classes; cross-entropy on the training entities, Adam (``lr`` 0.01, weight
decay 5e-4; fused, for every contender). The tasks are ``sparsetir.data.load_entities`` (AIFB,
MUTAG: every triple an edge and its inverse, so twice the predicates as relations).

Every contender (``sparsetir``; the baselines the libraries declare for the family
``rgcn-train``, ``baselines.variants("rgcn-train")``: PyG ``RGCNConv``, ``FastRGCNConv``, DGL) starts from one initial state_dict (``nn.RGCN``'s, PyG's keys). First each
is trained for ``epochs`` epochs, interleaved, and scored on the test entities (``test_acc``);
then one more epoch of each is timed ``samples`` times, interleaved round by round with a cache
flush before every epoch (``bench.training.time_epochs``, through ``sparsetir.timing``).

:func:`rgcn_training_contenders` builds the contenders and :func:`benchmark_rgcn_training` runs a
dataset; the workflow's ``rgcn`` family can wrap them.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np

from ..data.random_relational import RELATIONAL_PREFIX, parse_relational_spec
from .training import (
    TRAINING_POLICY,
    TrainSettings,
    TrainTask,
    benchmark_training,
    declared_baselines,
    training_main,
    training_summary,
)

__all__ = ["BASELINES", "EXPERIMENT", "RGCNTrainSettings", "SparsetirRGCN", "benchmark_rgcn_training",
           "entity_task", "main", "rgcn_training_contenders"]

EXPERIMENT = "rgcn-train"
SPARSETIR = "sparsetir"
#: The baselines the libraries declare for the family (``baselines.variants("rgcn-train")``), for the help text.
BASELINES = ("pyg-rgcnconv", "pyg-fastrgcnconv", "dgl-relgraphconv")


@dataclass(frozen=True)
class RGCNTrainSettings(TrainSettings):
    """PyG's example: 16 hidden features, 30 bases, Adam(lr 0.01, weight decay 5e-4), 50 epochs."""

    hidden: int = 16
    bases: int = 30


class SparsetirRGCN:
    """``sparsetir.nn.RGCN`` (the training contender); ``format``: the RGMS kernels' relational format."""

    def __init__(self, name: str = SPARSETIR, format=None):
        self.name, self.format = name, format

    def available(self) -> tuple[bool, str]:
        from ..version import __version__  # noqa: PLC0415 - with torch

        return True, f"sparsetir {__version__}"

    def model(self, dims: dict, state: dict):
        from ..nn import RGCN  # noqa: PLC0415 - torch and the compiler load after the thread settings

        model = RGCN(dims["nodes"], dims["hidden"], dims["classes"], dims["relations"], num_bases=dims["bases"],
                     format=self.format)
        model.load_state_dict(state)
        return model

    def structure(self, task):
        from ..nn import RGCNGraph  # noqa: PLC0415 - after the thread settings

        graph = task.graph
        return RGCNGraph.from_edges(graph["edge_index"], graph["edge_type"], task.dims["relations"],
                                    (graph["num_nodes"], graph["num_nodes"]))

    def forward(self, model, structure, x):
        return model(x, structure)


def entity_task(name: str, settings: RGCNTrainSettings) -> TrainTask:
    """The entity-classification task ``name`` as a :class:`~sparsetir.bench.training.TrainTask`:
    ``sparsetir.data.load_entities(name)``, or for ``relational:<nodes>:<relations>:<edges>`` a seeded
    random graph (each edge and its inverse) with four random classes (80 training, 20 test nodes)."""
    import torch  # noqa: PLC0415 - after the thread settings

    from ..data.entities import load_entities  # noqa: PLC0415

    task = _synthetic_task(name, settings.seed) if name.startswith(RELATIONAL_PREFIX) else load_entities(name)
    y = np.zeros(task.num_nodes, np.int64)
    y[task.train_idx], y[task.test_idx] = task.train_y, task.test_y
    dims = {"nodes": task.num_nodes, "hidden": settings.hidden, "classes": task.num_classes,
            "relations": task.num_relations, "bases": settings.bases}
    graph = {"edge_index": torch.from_numpy(np.array(task.edge_index)),
             "edge_type": torch.from_numpy(np.array(task.edge_type)), "num_nodes": task.num_nodes}
    return TrainTask(name, None, torch.from_numpy(y), torch.from_numpy(np.array(task.train_idx)),
                     torch.from_numpy(np.array(task.test_idx)), dims, graph,
                     f"{name}: {task.num_nodes:,} entities, {task.edge_index.shape[1]:,} edges, "
                     f"{task.num_relations} relations, {task.num_classes} classes, {len(task.train_idx)} training / "
                     f"{len(task.test_idx)} test entities")


def _synthetic_task(name: str, seed: int):
    from ..data.entities import EntityClassification  # noqa: PLC0415

    nodes, relations, edges = parse_relational_spec(name)
    if nodes < 100:
        raise ValueError(f"{name}: a synthetic task needs at least 100 nodes (80 training, 20 test)")
    rng = np.random.default_rng(seed)
    src, dst, rel = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges), rng.integers(0, relations, edges)
    labelled = rng.permutation(nodes)[:100]
    labels = rng.integers(0, 4, 100)
    return EntityClassification(name, nodes, 2 * relations, np.concatenate([np.stack([src, dst]), np.stack([dst, src])], 1),
                                np.concatenate([2 * rel, 2 * rel + 1]), labelled[:80], labels[:80], labelled[80:],
                                labels[80:], ("0", "1", "2", "3"))


def rgcn_training_contenders(names=None, *, sparsetir_formats: dict | None = None) -> dict:
    """``{name: contender}``: sparsetir's (``{name: format}``, default ``{"sparsetir": None}``) then the
    declared baselines (``names``: variant or library names, default every default one); a baseline
    that cannot run here gives the reason in its contender's place."""
    contenders = {name: SparsetirRGCN(name, fmt) for name, fmt in (sparsetir_formats or {SPARSETIR: None}).items()}
    return {**contenders, **declared_baselines(EXPERIMENT, names)}


def _initial_state(dims: dict, seed: int) -> dict:
    import torch  # noqa: PLC0415 - after the thread settings

    from ..nn import RGCN  # noqa: PLC0415

    torch.manual_seed(seed)
    model = RGCN(dims["nodes"], dims["hidden"], dims["classes"], dims["relations"], num_bases=dims["bases"])
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def benchmark_rgcn_training(dataset: str, settings: RGCNTrainSettings = RGCNTrainSettings(), *, contenders=None,
                            policy=TRAINING_POLICY, log=print) -> list[dict]:
    """Train and time every contender on ``dataset``; one record per contender (``training_record``)."""
    contenders = rgcn_training_contenders() if contenders is None else contenders
    return benchmark_training(EXPERIMENT, dataset, lambda: entity_task(dataset, settings),
                              lambda dims: _initial_state(dims, settings.seed), settings, contenders,
                              feat=settings.hidden, policy=policy, log=log)


def summary(records: list[dict]) -> str:
    """One line per record (``training.training_summary``)."""
    return training_summary(records, SPARSETIR)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.rgcn_train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", action="append",
                        help="aifb, mutag (default: both), or relational:<nodes>:<relations>:<edges> (random)")
    parser.add_argument("--baseline", action="append", help=f"default: {', '.join(BASELINES)}")
    parser.add_argument("--format", help="the RGMS kernels' relational format (default: compile_rgms's)")
    parser.add_argument("--epochs", type=int, default=RGCNTrainSettings.epochs, help="epochs before the accuracy")
    parser.add_argument("--samples", type=int, default=TRAINING_POLICY.samples, help="timed epochs per contender")

    def run(dataset, args, policy, log):
        contenders = rgcn_training_contenders(args.baseline, sparsetir_formats={SPARSETIR: args.format})
        return benchmark_rgcn_training(dataset, RGCNTrainSettings(epochs=args.epochs, seed=args.seed),
                                       contenders=contenders, policy=policy, log=log)

    return training_main(parser, argv, ["aifb", "mutag"], run, summary)


if __name__ == "__main__":
    sys.exit(main())
