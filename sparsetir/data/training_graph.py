"""A graph for node-classification training (GraphSAGE, GAT): adjacency, features, labels, split.

``load_training_graph(name, ...)`` gives a labelled graph of :mod:`.node_classification` with its
own features and labels, or any other registry graph or generator spec with seeded random
features and labels (``labelled`` false: such a graph is for timing only); the nodes split at
random (seeded) into train / val / test by the ``split`` fractions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .csr_canonical import canonical_csr
from .generators import generate, is_generated
from .node_classification import labelled_graphs, load_node_classification
from .registry import load, names

__all__ = ["SPLIT", "TrainingGraph", "load_training_graph"]

#: The train / val / test fractions of the node split (GraphSAGE and GAT training alike).
SPLIT = (0.6, 0.2, 0.2)


@dataclass
class TrainingGraph:
    """``adj_t`` (float32 CSR, row = target), ``features`` (CSR or dense), labels and the split."""

    name: str
    adj_t: sp.csr_matrix
    features: object
    labels: np.ndarray
    labelled: bool
    description: str
    train: np.ndarray = field(default=None)
    val: np.ndarray = field(default=None)
    test: np.ndarray = field(default=None)

    @property
    def num_classes(self) -> int:
        return int(self.labels.max()) + 1


def load_training_graph(name: str, *, random_features: int, random_classes: int, split: tuple = SPLIT,
                        seed: int = 0) -> TrainingGraph:
    """``name`` with its features and labels (a labelled graph) or ``random_features`` seeded
    random features and ``random_classes`` random labels; train / val / test split by ``split``."""
    rng = np.random.default_rng(seed)
    if name in labelled_graphs():
        data = load_node_classification(name)
        graph = TrainingGraph(name, data.adjacency, data.features, np.asarray(data.labels), True, data.description)
    else:
        if not is_generated(name) and name not in names():
            raise KeyError(f"unknown dataset {name!r}: a labelled graph ({', '.join(labelled_graphs())}), another "
                           "registry graph (random features and labels) or a generator spec")
        adj = canonical_csr(generate(name, seed) if is_generated(name) else load(name), pattern=True)
        if adj.shape[0] != adj.shape[1]:
            raise ValueError(f"{name} is {adj.shape[0]} x {adj.shape[1]}: GraphSAGE needs a graph (square)")
        n = adj.shape[0]
        features = rng.standard_normal((n, random_features), dtype=np.float32)
        labels = rng.integers(0, random_classes, n)
        graph = TrainingGraph(name, adj, features, labels, False,
                              f"{name}: random features ({random_features}) and labels: time only")
    order = rng.permutation(graph.labels.shape[0])
    train_end = int(round(split[0] * order.size))
    val_end = train_end + int(round(split[1] * order.size))
    graph.train, graph.val, graph.test = np.sort(order[:train_end]), np.sort(order[train_end:val_end]), np.sort(
        order[val_end:])
    return graph
