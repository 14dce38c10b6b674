"""R-GCN inference's reference: the inputs every contender gets, and the float64 result.

One layer, as PyG's ``RGCNConv(aggr="mean", root_weight=True, bias=True)``::

    h_i = sum_r (1 / |N_r(i)|) sum_{j in N_r(i)} x_j W_r  +  x_i root  +  bias

where ``N_r(i)`` are the sources of relation ``r``'s edges into ``i`` (row ``i`` of ``A_r``). The
model is two layers with a ReLU between them. :class:`RGCNInputs` holds the structure (a
relational matrix: ``coordinates()``, ``shape``, ``num_relations``, as
``formats.relational.RelationalMatrix`` provides), the features and the weights, all float32;
every contender (``sparsetir.nn.RGCN``, the baselines) computes from the same arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .case import rounding_tolerance


@dataclass(frozen=True)
class RGCNLayerWeights:
    """``weight (R, f_in, f_out)``, ``root (f_in, f_out)``, ``bias (f_out,)``, float32 (PyG's names)."""

    weight: np.ndarray
    root: np.ndarray
    bias: np.ndarray


@dataclass(frozen=True)
class RGCNInputs:
    """A relational structure, node features ``X (n, f_in)`` and the layers' weights."""

    graph: object
    X: np.ndarray
    layers: tuple

    @property
    def dims(self) -> tuple[int, ...]:
        """``(f_in, hidden, ..., f_out)``."""
        return (int(self.X.shape[1]), *(int(layer.weight.shape[2]) for layer in self.layers))


def mean_normalisation(relation: np.ndarray, row: np.ndarray, num_relations: int, m: int) -> np.ndarray:
    """``1 / |N_r(i)|`` for every edge ``(r, i, j)`` given by its relation and row (float32)."""
    relation, row = np.asarray(relation, dtype=np.int64), np.asarray(row, dtype=np.int64)
    if relation.size == 0:
        return np.zeros(0, np.float32)
    key = relation * m + row
    degree = np.bincount(key, minlength=num_relations * m)
    return (1.0 / degree[key]).astype(np.float32)


def _glorot(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    fan_in, fan_out = shape[-2], shape[-1]
    bound = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def rgcn_inputs(graph, dims: tuple = (32, 32, 32), *, seed: int = 0) -> RGCNInputs:
    """Seeded inputs for ``graph``: standard-normal features (the paper's entities have none) and
    Glorot-uniform weights, small random biases; ``dims`` is ``(f_in, hidden, ..., f_out)``."""
    if len(dims) < 2 or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
        raise ValueError(f"dims must be two or more positive ints (f_in, ..., f_out), got {dims!r}")
    rng = np.random.default_rng(seed)
    R, n = int(graph.num_relations), int(graph.shape[1])
    X = rng.standard_normal((n, dims[0]), dtype=np.float32)
    layers = tuple(RGCNLayerWeights(_glorot(rng, (R, f_in, f_out)), _glorot(rng, (f_in, f_out)),
                                    (0.1 * rng.standard_normal(f_out)).astype(np.float32))
                   for f_in, f_out in zip(dims[:-1], dims[1:]))
    return RGCNInputs(graph, X, layers)


def rgcn_reference(inputs: RGCNInputs) -> tuple[np.ndarray, np.ndarray]:
    """The model's output in float64 and an entry-wise tolerance for a float32 computation.

    The tolerance propagates float32 rounding through the layers (a sum's magnitude times
    ``16 eps sqrt(terms)``, then through the next layer's absolute weights) and is never below
    ``1e-4`` relative to the output's scale (the issue's comparison)."""
    graph = inputs.graph
    relation, row, col = (np.asarray(a, dtype=np.int64) for a in graph.coordinates())
    m = int(graph.shape[0])
    if graph.shape[0] != graph.shape[1] and len(inputs.layers) > 1:
        raise ValueError(f"a multi-layer R-GCN needs square relations, got {graph.shape}")
    norm = mean_normalisation(relation, row, int(graph.num_relations), m).astype(np.float64)
    h = np.asarray(inputs.X, dtype=np.float64)
    error = np.zeros_like(h)
    for index, layer in enumerate(inputs.layers):
        W, root, bias = (np.asarray(a, dtype=np.float64) for a in (layer.weight, layer.root, layer.bias))
        messages = np.einsum("el,elk->ek", h[col] * norm[:, None], W[relation]) if relation.size else \
            np.zeros((0, W.shape[2]))
        magnitude = np.zeros((m, W.shape[2]))
        if relation.size:
            np.add.at(magnitude, row, np.einsum("el,elk->ek", np.abs(h[col]) * norm[:, None], np.abs(W[relation])))
        out = h[:m] @ root + bias
        magnitude += np.abs(h[:m]) @ np.abs(root) + np.abs(bias)
        np.add.at(out, row, messages)
        terms = np.bincount(row, minlength=m)[:, None] * W.shape[1] + W.shape[1] + 1.0
        propagated = np.zeros_like(out)
        if relation.size:
            np.add.at(propagated, row, np.einsum("el,elk->ek", error[col] * norm[:, None], np.abs(W[relation])))
        propagated += error[:m] @ np.abs(root)
        error = rounding_tolerance(magnitude, terms) + propagated
        if index < len(inputs.layers) - 1:
            out = np.maximum(out, 0.0)
        h = out
    scale = float(np.max(np.abs(h))) if h.size else 0.0
    return h, np.maximum(error, 1e-4 * scale)
