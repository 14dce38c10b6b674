"""R-GCN inference on RGMS (``sparsetir.ops.rgms``): each layer is one compiled kernel.

A layer is PyG's ``RGCNConv(aggr="mean", root_weight=True, bias=True)``::

    h_i = sum_r (1 / |N_r(i)|) sum_{j -> i in relation r} x_j W_r  +  x_i root  +  bias

composed from RGMS alone: the mean normalisation becomes the edges' values, and the root
weight one more relation, the identity (``x_i root`` is relation ``R``'s edge ``i -> i`` with
weight ``root``). So a layer is ``rgms(A', X, [W; root]) + bias`` over the graph ``A'`` with
``R + 1`` relations, built once per graph (:meth:`RGCN.prepare`) and shared by the layers; the
kernels are compiled once per graph and feature sizes.

Inference only: the kernels are not recorded by autograd, so an output that a backward pass
reaches raises a ``RuntimeError`` there (never a silently missing gradient).
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from ..formats.relational import RelationalMatrix, read_relational_input
from ..ops import compile_rgms
from ..reference.rgcn import mean_normalisation


class RGCNGraph:
    """A relational graph prepared for R-GCN layers: its ``num_relations`` relations with
    mean-normalised values, plus the identity as relation ``num_relations`` (the root term)."""

    def __init__(self, adj):
        matrix = read_relational_input(adj)
        m, n = matrix.shape
        if m != n:
            raise ValueError(f"R-GCN needs square relations (entities x entities), got {m}x{n}")
        self.num_relations, self.num_nodes = matrix.num_relations, n
        relation, row, col = matrix.coordinates()
        norm = mean_normalisation(relation, row, matrix.num_relations, m)
        # the identity relation's rows 0..n-1 hold one entry each, on the diagonal
        indptr = np.concatenate([np.asarray(matrix.indptr, dtype=np.int64),
                                 matrix.nnz + 1 + np.arange(n, dtype=np.int64)])
        indices = np.concatenate([np.asarray(matrix.indices, dtype=np.int64), np.arange(n, dtype=np.int64)])
        values = np.concatenate([norm, np.ones(n, np.float32)])
        self.matrix = RelationalMatrix((m, n), matrix.num_relations + 1, indptr, indices, values)
        self.kernels: dict = {}

    def kernel(self, f_in: int, f_out: int, *, format=None, target="llvm", **knobs):
        """The RGMS kernel of this graph for ``f_in -> f_out`` (compiled on first use)."""
        key = (f_in, f_out, format, str(target), tuple(sorted(knobs.items())))
        if key not in self.kernels:
            self.kernels[key] = compile_rgms(self.matrix, f_in, f_out, format=format, target=target, **knobs)
        return self.kernels[key]


class _InferenceOnly(torch.autograd.Function):
    """Passes a result through; a backward pass that reaches it is an error."""

    @staticmethod
    def forward(ctx, result, *tracked):
        return result.view_as(result)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("sparsetir.nn R-GCN layers are inference-only: their kernels are not recorded by "
                           "autograd, so no gradient reaches X or the weights (use PyG's RGCNConv to train)")


class RGCNConv(torch.nn.Module):
    """One R-GCN layer (PyG ``RGCNConv(aggr="mean", root_weight=True, bias=bias)``), inference only.

    Parameters
    ----------
    num_relations, in_dim, out_dim : int
        Relations of the graphs it runs on, and its feature sizes.
    bias : bool
        Whether to add a learnable bias.
    format, target, **knobs
        How the RGMS kernel is compiled (``sparsetir.ops.compile_rgms``): ``format=None`` picks
        by a heuristic, ``"auto"`` uses the tuning database; ``target="cuda"`` for GPU tensors.

    Attributes ``weight (R, in, out)``, ``root (in, out)`` and ``bias (out,)`` have PyG's names and
    shapes, so ``load_state_dict`` of a PyG ``RGCNConv`` works.
    """

    def __init__(self, num_relations: int, in_dim: int, out_dim: int, bias: bool = True, *, format=None,
                 target="llvm", **knobs):
        super().__init__()
        for name, value in (("num_relations", num_relations), ("in_dim", in_dim), ("out_dim", out_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.num_relations, self.in_dim, self.out_dim = num_relations, in_dim, out_dim
        self.weight = torch.nn.Parameter(torch.empty(num_relations, in_dim, out_dim))
        self.root = torch.nn.Parameter(torch.empty(in_dim, out_dim))
        self.bias = torch.nn.Parameter(torch.empty(out_dim)) if bias else None
        self.compile_options = {"format": format, "target": target, **knobs}
        self._stacked: tuple | None = None  # (weights' versions, [weight; root])
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform weights and a zero bias (PyG's initialisation)."""
        for parameter in (self.weight, self.root):
            bound = (6.0 / (parameter.shape[-2] + parameter.shape[-1])) ** 0.5
            torch.nn.init.uniform_(parameter, -bound, bound)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, graph, X: torch.Tensor) -> torch.Tensor:
        """``(n, out_dim)`` for an :class:`RGCNGraph` (or anything :class:`RGCNGraph` takes) and ``X (n, in_dim)``."""
        graph = graph if isinstance(graph, RGCNGraph) else RGCNGraph(graph)
        if graph.num_relations != self.num_relations:
            raise ValueError(f"this layer has {self.num_relations} relations, the graph {graph.num_relations}")
        if not isinstance(X, torch.Tensor):
            raise TypeError(f"X must be a torch tensor, got {type(X).__name__}")
        if X.dim() != 2 or X.shape != (graph.num_nodes, self.in_dim):
            raise ValueError(f"X must be ({graph.num_nodes}, {self.in_dim}) for this graph and layer, "
                             f"got {tuple(X.shape)}")
        if X.dtype != self.weight.dtype:
            raise TypeError(f"X is {X.dtype} but the layer's weights are {self.weight.dtype}")
        weights = self._stacked_weights(X.device)
        kernel = graph.kernel(self.in_dim, self.out_dim, dtype=str(X.dtype).replace("torch.", ""),
                              **self.compile_options)
        out = kernel(X.detach(), weights)
        if self.bias is not None:
            out.add_(self.bias.detach().to(out.device))
        tracked = [t for t in (X, self.weight, self.root, self.bias) if t is not None and t.requires_grad]
        if torch.is_grad_enabled() and tracked:
            out = _InferenceOnly.apply(out, *tracked)
        return out

    def _stacked_weights(self, device) -> torch.Tensor:
        """``[weight; root]`` (the identity relation's weight last), rebuilt only when a weight changed."""
        key = (self.weight._version, self.root._version, self.weight.data_ptr(), self.root.data_ptr(), str(device))
        if self._stacked is None or self._stacked[0] != key:
            self._stacked = (key, torch.cat([self.weight.detach(), self.root.detach()[None]]).to(device))
        return self._stacked[1]

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, num_relations={self.num_relations}, bias={self.bias is not None}"


class RGCN(torch.nn.Module):
    """Two R-GCN layers with a ReLU between them (inference only).

    Parameters
    ----------
    num_relations, in_dim, hidden_dim, out_dim : int
        The graph's relations and the feature sizes.
    bias : bool
        Learnable biases in both layers.
    format, target, **knobs
        How each layer's RGMS kernel is compiled (see :class:`RGCNConv`).

    ``forward(adj, X)`` takes ``sparsetir.data.load_relational(name)`` (or a list of R sparse
    matrices, or a graph from :meth:`prepare`) and ``X (n, in_dim)``; it prepares a graph once and
    reuses it while the same ``adj`` object is passed.
    """

    def __init__(self, num_relations: int, in_dim: int, hidden_dim: int, out_dim: int, bias: bool = True, *,
                 format=None, target="llvm", **knobs):
        super().__init__()
        self.conv1 = RGCNConv(num_relations, in_dim, hidden_dim, bias, format=format, target=target, **knobs)
        self.conv2 = RGCNConv(num_relations, hidden_dim, out_dim, bias, format=format, target=target, **knobs)
        self._prepared: tuple | None = None  # (weak reference to the last adj, its RGCNGraph)

    def prepare(self, adj) -> RGCNGraph:
        """The :class:`RGCNGraph` of ``adj`` (normalisation and root relation, built once per graph)."""
        if isinstance(adj, RGCNGraph):
            return adj
        if self._prepared is not None:
            reference, graph = self._prepared
            if reference() is adj:
                return graph
        graph = RGCNGraph(adj)
        try:
            self._prepared = (weakref.ref(adj), graph)
        except TypeError:  # a plain list cannot be weakly referenced: prepare it per call (or use prepare())
            self._prepared = None
        return graph

    def forward(self, adj, X: torch.Tensor) -> torch.Tensor:
        graph = self.prepare(adj)
        return self.conv2(graph, torch.relu(self.conv1(graph, X)))
