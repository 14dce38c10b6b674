"""Full-graph GAT training: sparsetir's ``nn.GATConv`` against PyG's and DGL's ``GATConv``, epoch time and accuracy.

    python -m sparsetir.bench.gat --dataset pubmed --dataset amazon_cs --dataset coauthor_cs [--samples 10]

The model is the GAT paper's (Velickovic et al.; PyG's ``examples/gat.py``): dropout on the
input features, a ``GATConv(in, hidden, heads)`` layer (``hidden`` 8 per head, 8 heads,
concatenated), ELU, dropout, a ``GATConv(hidden * heads, classes, heads=1, concat=False)``
layer; dropout on the edge coefficients in both (``dropout`` 0.6 everywhere), self-loops added, cross-entropy
on the training nodes, Adam (``lr`` 0.005, weight decay 5e-4; fused, for every contender). A
labelled graph (``sparsetir.data.node_classification``: cora, amazon_cs, coauthor_cs, ...) has
its own features and labels; any other registry graph (pubmed here has no labels) gets seeded
random features (``random_features``) and labels: it is timed, its accuracy means nothing.
The nodes are split at random (seeded), 60/20/20, as the GraphSAGE benchmark splits them.
Bag-of-words features (density below 10%: coauthor_cs) reach sparsetir's contender as a torch
sparse CSR tensor (``SparsetirGAT(sparse_features="auto")``): its first projection is an SpMM and
the input dropout drops stored values only; the baselines get the dense matrix, as their layers take.
sparsetir's dropouts (input, hidden, edge coefficients) are ``sparsetir.nn.dropout``: torch's distribution, the
CPU mask drawn by numpy's PCG64 in one pass (torch's ``bernoulli_`` was most of the epoch); the
baselines use torch's.

Every contender (``sparsetir``; the baselines the libraries declare for the family ``gat``,
``baselines.variants("gat")``: PyG ``GATConv``, DGL ``GATConv``) starts from one initial
state_dict (PyG's keys, ``convs.<i>.lin.weight``, ``att_src``, ``att_dst``, ``bias``). Each is
trained for ``epochs`` epochs, interleaved, and scored on the test nodes; then one more epoch
of each is timed ``samples`` times, interleaved round by round with a cache flush before every
epoch (``bench.training.time_epochs``, through ``sparsetir.timing``), and the peak memory of
one epoch is taken on its own: the most bytes torch's CPU allocator holds beyond what it held
before, at op boundaries (``torch.profiler``'s ``profile_memory`` events; a temporary inside one
op counts as its net), an estimate of the same kind for every contender.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .training import (
    TRAINING_POLICY,
    TrainSettings,
    TrainTask,
    benchmark_training,
    declared_baselines,
    training_main,
    training_summary,
)

__all__ = ["BASELINES", "EXPERIMENT", "GATSettings", "GATModel", "SparsetirGAT", "benchmark_gat_training",
           "check_gat_dataset", "gat_contenders", "gat_task", "main"]

EXPERIMENT = "gat"
SPARSETIR = "sparsetir"
#: The baselines the libraries declare for the family (``baselines.variants("gat")``), for the help text.
BASELINES = ("pyg-gatconv", "dgl-gatconv")
DEFAULT_DATASETS = ("pubmed", "amazon_cs", "coauthor_cs")


@dataclass(frozen=True)
class GATSettings(TrainSettings):
    """The GAT paper's setup: 8 heads of 8 features, dropout 0.6, Adam(lr 0.005, weight decay 5e-4)."""

    lr: float = 0.005
    hidden: int = 8
    heads: int = 8
    dropout: float = 0.6
    epochs: int = 20
    random_features: int = 500
    random_classes: int = 3


def GATModel(layer, dims: dict):  # noqa: N802 - a model factory named like the class it builds
    """The two layers in ``convs`` (``layer``: a GATConv class with PyG's arguments): the model's one
    definition, ``baselines.pyg.gat_two_layers``, as every contender builds it."""
    from baselines.pyg import gat_two_layers  # noqa: PLC0415 - the baselines load after the thread settings

    return gat_two_layers(layer, dims)


#: Input features below this density go to sparsetir's contender as a torch sparse CSR tensor (``"auto"``).
SPARSE_FEATURES_BELOW = 0.1


class SparsetirGAT:
    """``sparsetir.nn.GATConv`` (the training contender); the structure is ``(indptr, indices)`` of adj_t.

    ``sparse_features``: give the layer the input features as a torch sparse CSR tensor, so the first
    projection is an SpMM and the input dropout drops stored values only (the same distribution as
    dropout on the dense matrix: its zeros stay zeros); ``"auto"``: where the features' density is
    below :data:`SPARSE_FEATURES_BELOW` (bag-of-words features)."""

    def __init__(self, name: str = SPARSETIR, sparse_features="auto"):
        self.name, self.sparse_features = name, sparse_features

    def available(self) -> tuple[bool, str]:
        from ..version import __version__  # noqa: PLC0415 - with torch

        return True, f"sparsetir {__version__}"

    def model(self, dims: dict, state: dict):
        from ..nn import GATConv  # noqa: PLC0415 - torch and the compiler load after the thread settings

        model = GATModel(GATConv, dims)
        model.load_state_dict(state)
        self.dropout = dims["dropout"]
        return model

    def structure(self, task):
        import torch  # noqa: PLC0415 - after the thread settings

        adj_t, features = task.graph["adj_t"], task.graph["features"]
        sparse = self.sparse_features
        if sparse == "auto":
            sparse = sp.issparse(features) and features.nnz < SPARSE_FEATURES_BELOW * np.prod(features.shape)
        x = None
        if sparse:
            csr = sp.csr_matrix(features, dtype=np.float32)
            x = torch.sparse_csr_tensor(torch.from_numpy(csr.indptr.astype(np.int64)),
                                        torch.from_numpy(csr.indices.astype(np.int64)), torch.from_numpy(csr.data),
                                        size=csr.shape)
        return (torch.from_numpy(adj_t.indptr.astype(np.int64)), torch.from_numpy(adj_t.indices.astype(np.int64))), x

    def forward(self, model, structure, x):
        from baselines.pyg import gat_forward  # noqa: PLC0415 - the model's one definition

        from ..nn.dropout import dropout  # noqa: PLC0415 - torch's distribution, PCG64's mask on the CPU

        structure, sparse_x = structure
        if sparse_x is None:
            return gat_forward(model, structure, x, self.dropout, drop=dropout)
        import torch  # noqa: PLC0415 - after the thread settings
        import torch.nn.functional as F  # noqa: PLC0415

        values = dropout(sparse_x.values(), p=self.dropout, training=model.training)
        dropped = torch.sparse_csr_tensor(sparse_x.crow_indices(), sparse_x.col_indices(), values,
                                          size=sparse_x.shape)
        h = F.elu(model.convs[0](dropped, structure))  # the input dropout done: the rest as gat_forward
        h = dropout(h, p=self.dropout, training=model.training)
        return model.convs[1](h, structure)


def check_gat_dataset(name: str) -> None:
    """``ValueError`` unless ``name`` is a labelled graph, a registry graph or a generator spec."""
    from ..data import is_generated, names  # noqa: PLC0415 - after the thread settings
    from ..data.node_classification import labelled_graphs  # noqa: PLC0415 - after the thread settings

    if not is_generated(name) and name not in set(names()) | set(labelled_graphs()):
        raise ValueError(f"unknown dataset {name!r}; labelled graphs: {', '.join(labelled_graphs())}, or any "
                         "registry graph (random features, time only)")


def gat_task(name: str, settings: GATSettings) -> TrainTask:
    """The node-classification task ``name`` as a :class:`~sparsetir.bench.training.TrainTask`
    (``graph``: ``adj_t``, the scipy CSR adjacency, row = target, and ``edge_index``)."""
    import torch  # noqa: PLC0415 - after the thread settings

    from ..data.training_graph import load_training_graph  # noqa: PLC0415 - one loader and split for both trainings

    graph = load_training_graph(name, random_features=settings.random_features,
                                random_classes=settings.random_classes, seed=settings.seed)
    features = graph.features.toarray() if hasattr(graph.features, "toarray") else np.asarray(graph.features)
    adj_t = graph.adj_t
    rows = np.repeat(np.arange(adj_t.shape[0], dtype=np.int64), np.diff(adj_t.indptr))
    edge_index = torch.from_numpy(np.stack([adj_t.indices.astype(np.int64), rows]))
    dims = {"in": features.shape[1], "hidden": settings.hidden, "heads": settings.heads,
            "classes": graph.num_classes, "dropout": settings.dropout}
    return TrainTask(name, torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32)),
                     torch.from_numpy(graph.labels.astype(np.int64)), torch.from_numpy(graph.train),
                     torch.from_numpy(graph.test), dims,
                     {"adj_t": adj_t, "edge_index": edge_index, "features": graph.features},
                     f"{name}: {adj_t.shape[0]:,} nodes, {adj_t.nnz:,} edges, {features.shape[1]} features, "
                     f"{graph.num_classes} classes" + ("" if graph.labelled else " (random features and labels)"),
                     labelled=graph.labelled)


def gat_contenders(names=None) -> dict:
    """``{name: contender}``: sparsetir's, then the declared baselines (``names``: variant or library
    names, default every default one); a baseline that cannot run here gives the reason instead."""
    return {SPARSETIR: SparsetirGAT(), **declared_baselines(EXPERIMENT, names)}


def _initial_state(dims: dict, seed: int) -> dict:
    import torch  # noqa: PLC0415 - after the thread settings

    from ..nn import GATConv  # noqa: PLC0415

    torch.manual_seed(seed)
    return {key: value.detach().clone() for key, value in GATModel(GATConv, dims).state_dict().items()}


def peak_memory_bytes(run) -> int | None:
    """The most bytes torch's CPU allocator held during one training epoch of ``run`` beyond what it
    held before, at op boundaries (``torch.profiler``'s memory events); None if it records none."""
    import torch  # noqa: PLC0415 - after the thread settings

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        run.step()
    current = peak = 0
    # the outermost events (ops with their children's allocations, and frees outside any op), in time order:
    # the bytes held at op boundaries (a temporary inside one op is seen only as its net)
    for event in sorted((e for e in prof.events() if e.cpu_parent is None), key=lambda e: e.time_range.start):
        change = getattr(event, "cpu_memory_usage", 0) or 0
        if change:
            current += change
            peak = max(peak, current)
    return peak or None


def benchmark_gat_training(dataset: str, settings: GATSettings = GATSettings(), *, contenders=None,
                           policy=TRAINING_POLICY, log=print) -> list[dict]:
    """Train and time every contender on ``dataset``; one record per contender (``training_record``,
    with ``labelled`` and ``peak_memory_bytes``)."""
    contenders = gat_contenders() if contenders is None else contenders
    return benchmark_training(EXPERIMENT, dataset, lambda: gat_task(dataset, settings),
                              lambda dims: _initial_state(dims, settings.seed), settings, contenders,
                              feat=settings.hidden * settings.heads, policy=policy, log=log,
                              extra=lambda run, task: {"labelled": task.labelled,
                                                       "peak_memory_bytes": peak_memory_bytes(run)})


def summary(records: list[dict]) -> str:
    """One line per record (``training.training_summary``)."""
    return training_summary(records, SPARSETIR)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.gat", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", action="append", help=f"a graph (default: {', '.join(DEFAULT_DATASETS)})")
    parser.add_argument("--baseline", action="append", help=f"default: {', '.join(BASELINES)}")
    parser.add_argument("--epochs", type=int, default=GATSettings.epochs, help="epochs before the accuracy")
    parser.add_argument("--samples", type=int, default=10, help="timed epochs per contender")

    def run(dataset, args, policy, log):
        return benchmark_gat_training(dataset, GATSettings(epochs=args.epochs, seed=args.seed),
                                      contenders=gat_contenders(args.baseline), policy=policy, log=log)

    return training_main(parser, argv, DEFAULT_DATASETS, run, summary)


if __name__ == "__main__":
    sys.exit(main())
