"""Two-layer GAT's reference (the ``gat`` family's model, PyG ``GATConv`` semantics at dropout 0).

The model is ``bench.gat``'s: ``GATConv(in, hidden, heads)`` (heads concatenated), ELU,
``GATConv(hidden * heads, classes, heads=1, concat=False)``, self-loops by PyG's rule
(``runtime.edge_softmax.with_self_loops``). :func:`gat_inputs` draws, from a seed, what every
contender gets: standard-normal features, PyG-keyed weights (``convs.<i>.lin.weight``, ``att_src``,
``att_dst``, ``bias``; glorot as PyG draws them, small random biases so they are checked) and a
loss weighting ``G`` (the loss is ``sum(out * G)``). :func:`gat_reference` computes, in float64 with
plain torch on the CPU (gathers, ``scatter_reduce`` max, ``index_add``), the output and the gradients
of every weight (:data:`CHECKED_KEYS` order), flattened into one vector with an entry-wise tolerance:
what a contender's training step (forward, then the loss's gradients) must give.

torch is imported when called: the rest of the reference package is numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .case import FLOAT32_EPS, TOLERANCE_ULPS

__all__ = ["CHECKED_KEYS", "GATInputs", "gat_flatten", "gat_inputs", "gat_reference"]

LAYER_KEYS = ("lin.weight", "att_src", "att_dst", "bias")
#: The parameters whose gradients are checked, in the checked vector's order (after the output).
CHECKED_KEYS = tuple(f"convs.{layer}.{key}" for layer in (0, 1) for key in LAYER_KEYS)
NEGATIVE_SLOPE = 0.2


@dataclass(frozen=True)
class GATInputs:
    """The structure (adj_t CSR: row = target, before self-loops), features ``X (n, in)``, the
    PyG-keyed ``state`` (float32 numpy), the loss weighting ``G (n, classes)`` and the model's sizes."""

    indptr: np.ndarray
    indices: np.ndarray
    X: np.ndarray
    state: dict
    G: np.ndarray
    heads: int
    hidden: int
    classes: int

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def dims(self) -> dict:
        """``bench.gat``'s model sizes (dropout 0: the check's)."""
        return {"in": int(self.X.shape[1]), "hidden": self.hidden, "heads": self.heads, "classes": self.classes,
                "dropout": 0.0}


def _glorot(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    bound = np.sqrt(6.0 / (shape[-2] + shape[-1]))
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def gat_inputs(indptr, indices, in_features: int, *, heads: int, hidden: int, classes: int,
               seed: int = 0) -> GATInputs:
    """Seeded inputs for a square structure (adj_t CSR) and the model's sizes."""
    for name, value in (("in_features", in_features), ("heads", heads), ("hidden", hidden), ("classes", classes)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    indptr, indices = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
    n = indptr.shape[0] - 1
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, int(in_features)), dtype=np.float32)
    state = {}
    for layer, (f_in, h, c) in enumerate(((int(in_features), heads, hidden), (heads * hidden, 1, classes))):
        state[f"convs.{layer}.lin.weight"] = _glorot(rng, (h * c, f_in))
        state[f"convs.{layer}.att_src"] = _glorot(rng, (1, h, c))
        state[f"convs.{layer}.att_dst"] = _glorot(rng, (1, h, c))
        state[f"convs.{layer}.bias"] = (0.1 * rng.standard_normal(h * c if layer == 0 else c)).astype(np.float32)
    G = rng.standard_normal((n, int(classes)), dtype=np.float32)
    return GATInputs(indptr, indices, X, state, G, int(heads), int(hidden), int(classes))


def gat_flatten(out, grads):
    """The checked vector: the output, then the gradients (:data:`CHECKED_KEYS` order), flattened (torch)."""
    import torch  # noqa: PLC0415

    return torch.cat([out.reshape(-1), *(g.reshape(-1) for g in grads)])


def _layer(rows, cols, m: int, x, weight, att_src, att_dst, bias, heads: int, channels: int, concat: bool):
    import torch  # noqa: PLC0415

    h = (x @ weight.T).view(-1, heads, channels)
    z = torch.nn.functional.leaky_relu((h * att_src).sum(-1)[cols] + (h * att_dst).sum(-1)[rows], NEGATIVE_SLOPE)
    top = z.new_full((m, heads), -torch.inf).scatter_reduce(0, rows[:, None].expand(-1, heads), z, "amax")
    e = torch.exp(z - top[rows])
    alpha = e / e.new_zeros((m, heads)).index_add(0, rows, e)[rows]
    out = h.new_zeros((m, heads, channels)).index_add(0, rows, alpha[..., None] * h[cols])
    return (out.reshape(m, heads * channels) if concat else out.mean(dim=1)) + bias


def gat_reference(inputs: GATInputs) -> tuple[np.ndarray, np.ndarray]:
    """The checked vector in float64 (output, then the weights' gradients of ``sum(out * G)``) and an
    entry-wise tolerance for a float32 computation: ``16 eps sqrt(terms)`` (terms: the structure's
    entries and nodes, the longest reduction of the backward) times each entry's magnitude plus its
    block's largest, times 4 for the two layers' propagation, plus a hundredth of that relative to the
    vector's largest entry (a floor for blocks that are 0 in exact arithmetic)."""
    import torch  # noqa: PLC0415

    from ..runtime.edge_softmax import with_self_loops  # noqa: PLC0415 - PyG's self-loop rule, numpy only

    n = inputs.num_nodes
    indptr, indices = with_self_loops(inputs.indptr, inputs.indices, n)
    rows = torch.from_numpy(np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)))
    cols = torch.from_numpy(indices)
    params = {key: torch.from_numpy(value).double().requires_grad_() for key, value in inputs.state.items()}
    x = torch.from_numpy(inputs.X).double()
    h = torch.nn.functional.elu(_layer(rows, cols, n, x, *(params[f"convs.0.{k}"] for k in LAYER_KEYS),
                                       inputs.heads, inputs.hidden, True))
    out = _layer(rows, cols, n, h, *(params[f"convs.1.{k}"] for k in LAYER_KEYS), 1, inputs.classes, False)
    grads = torch.autograd.grad((out * torch.from_numpy(inputs.G).double()).sum(), [params[k] for k in CHECKED_KEYS])
    blocks = [out.detach(), *grads]
    terms = indices.shape[0] + n + inputs.X.shape[1]
    scale = 4 * TOLERANCE_ULPS * FLOAT32_EPS * np.sqrt(terms)
    checked = gat_flatten(out.detach(), grads).numpy()
    floor = 1e-2 * scale * float(np.abs(checked).max(initial=0.0))  # a block that is 0 (att_dst's gradient with
    # every score on one side of the leaky ReLU: the softmax ignores a per-target shift) gets rounding noise
    tolerance = [scale * (b.abs() + b.abs().max()).reshape(-1).numpy() + floor + 1e-30 for b in blocks]
    return checked, np.concatenate(tolerance)
