"""GraphSAGE: :class:`SAGEConv` (PyG's constructor, ``reset_parameters`` and state_dict keys) and
:class:`GraphSAGE` (n layers, the state_dict keys of PyG's ``GraphSAGE``).

``x'_i = W_r x_i + W_l mean_{j in N(i)} x_j + b``. A layer with dense features is one op,
``torch.ops.sparsetir.aggregate_transform`` (``ops.aggregate_transform``): the aggregation, both
projections and the bias, in the cheaper order (project first where the input is wider than the
output, ``mean(x) W_l^T = mean(x W_l^T)``, as DGL does), its backward in its own cheaper order;
``W_r x_i`` accumulates into the same output where the targets' features lead the sources' (a
graph or a sampled block). On an unweighted structure in CSR the neighbour mean is a ``1 / degree``
row scale inside the reduction with no value array (``spmm_row_scaled``, its gradient the same over
A^T); otherwise an SpMM whose values are the weights divided by the degree. Node features may be
a torch sparse CSR tensor (bag-of-words features are mostly zeros): the projections are then
SpMMs too. Max and min aggregate first (``torch.ops.sparsetir.spmm_reduce``).

In training mode ``GraphSAGE(dropout=p, dropout_in_aggregation=True)`` gives the dropout after each
hidden layer to the next layer's op (``aggregate_transform(keep=, p=)``): on a sampled block the
mask is read inside the SpMM as the sources' rows are gathered, so the dropped copy of the
sources' features is not made (only the targets' rows, for the root term).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..ops import torch_ops
from ..ops.aggregate_transform import GATHER_COST, aggregate_transform, projects_first
from .adjacency import Adjacency, as_adjacency
from .dropout import draw_keep

__all__ = ["GATHER_COST", "GraphSAGE", "SAGEConv", "projects_first"]

AGGREGATIONS = ("mean", "sum", "add", "max", "min")
EXTREMES = ("max", "min")  # not linear: aggregated before projecting, by torch.ops.sparsetir.spmm_reduce


def _is_sparse(x) -> bool:
    return isinstance(x, Tensor) and x.layout in (torch.sparse_csr, torch.sparse_coo)


def _sparse_matmul(x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T`` for sparse CSR/COO features ``x``, through the custom SpMM (weight differentiable)."""
    csr = x.coalesce().to_sparse_csr() if x.layout == torch.sparse_coo else x
    values = csr.values().to(weight.dtype)
    return torch.ops.sparsetir.spmm(csr.crow_indices(), csr.col_indices(), values, weight.t().contiguous(),
                                    csr.shape[1])


def _leading_rows(x: Tensor, rows: int) -> Tensor:
    """The first ``rows`` rows of dense or sparse CSR features (a block's targets lead its sources)."""
    if x.layout == torch.sparse_coo:
        x = x.coalesce().to_sparse_csr()
    if x.layout != torch.sparse_csr:
        return x[:rows]
    crow = x.crow_indices()[:rows + 1]
    end = crow[-1]
    return torch.sparse_csr_tensor(crow, x.col_indices()[:end], x.values()[:end], size=(rows, x.shape[1]))


def _linear(x: Tensor, layer: nn.Linear) -> Tensor:
    if _is_sparse(x):
        out = _sparse_matmul(x, layer.weight)
        return out if layer.bias is None else out + layer.bias
    return layer(x)


class SAGEConv(nn.Module):
    """The GraphSAGE operator with mean, sum, max or min aggregation, computed with sparsetir's kernels.

    Parameters are PyG's ``SAGEConv``'s:

    in_channels : int or (int, int)
        Input features (source, target); ``-1``: inferred on the first call (lazy).
    out_channels : int
    aggr : str
        ``"mean"`` (default), ``"sum"``/``"add"``, ``"max"`` or ``"min"`` (``torch.ops.sparsetir.spmm_reduce``:
        a target without neighbours gets 0, and the gradient is split among ties as PyG's).
    normalize : bool
        L2-normalise the output rows.
    root_weight : bool
        Add ``lin_r(x_target)``.
    project : bool
        Apply ``relu(lin(x))`` to the sources first.
    bias : bool
        ``lin_l`` has a bias.
    format : str
        sparsetir only: the format of the aggregation's SpMM (``"csr"``, ``"hyb"``, ``"auto"``, ...).

    The structure (``forward``'s ``edge_index``) is any form :func:`~sparsetir.nn.as_adjacency`
    takes: an edge list (row 0 sources, row 1 targets), an ``EdgeIndex``, an ``(indptr, indices)``
    pair, a torch sparse CSR tensor or a scipy matrix (both adj_t: row = target).
    """

    def __init__(self, in_channels, out_channels: int, aggr: str = "mean", normalize: bool = False,
                 root_weight: bool = True, project: bool = False, bias: bool = True, format: str = "csr", **kwargs):
        super().__init__()
        if not isinstance(aggr, str) or aggr not in AGGREGATIONS:
            raise ValueError(f"SAGEConv aggregates with {', '.join(AGGREGATIONS)}; got aggr={aggr!r}")
        unknown = set(kwargs) - {"flow", "node_dim", "decomposed_layers"}
        if unknown:
            raise TypeError(f"SAGEConv got unexpected keyword arguments {sorted(unknown)}")
        if kwargs.get("flow", "source_to_target") != "source_to_target":
            raise ValueError("SAGEConv supports flow='source_to_target' only")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr, self.normalize, self.root_weight, self.project = aggr, normalize, root_weight, project
        self.format = format
        sources, targets = (in_channels, in_channels) if isinstance(in_channels, int) else in_channels
        if project:
            if sources <= 0:
                raise ValueError("'SAGEConv' does not support lazy initialization with `project=True`")
            self.lin = nn.Linear(sources, sources, bias=True)
        self.lin_l = _make_linear(sources, out_channels, bias)
        if root_weight:
            self.lin_r = _make_linear(targets, out_channels, False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's initialisation: kaiming-uniform weights (a = sqrt(5)), biases uniform in +-1/sqrt(fan_in)."""
        for name in ("lin", "lin_l", "lin_r"):
            layer = getattr(self, name, None)
            if layer is not None and not isinstance(layer.weight, nn.parameter.UninitializedParameter):
                _reset_linear(layer)

    def forward(self, x, edge_index, size: tuple[int, int] | None = None) -> Tensor:
        """``x``: node features (dense or sparse), or a (sources, targets) pair for a bipartite
        layer (targets may be None); ``size``: (sources, targets) node counts where the structure
        does not say."""
        x_src, x_dst = x if isinstance(x, (tuple, list)) else (x, x)
        num_sources = size[0] if size is not None else x_src.shape[0]
        num_targets = size[1] if size is not None else (x_dst.shape[0] if x_dst is not None else None)
        adj = as_adjacency(edge_index, num_sources, num_targets)
        if self.project:
            x_src = _linear(x_src, self.lin).relu()
        return self.propagate(x_src, x_dst, adj)

    def fuses_dropout(self, x) -> bool:
        """Whether :meth:`propagate` reads an input dropout's mask inside its op for features ``x``
        (dense, mean or sum aggregation, no ``project``, weights initialised)."""
        return (self.aggr not in EXTREMES and not self.project and isinstance(x, Tensor) and not _is_sparse(x)
                and not isinstance(self.lin_l.weight, nn.parameter.UninitializedParameter))

    def propagate(self, x_src, x_dst, adj: Adjacency, dropout: float = 0.0) -> Tensor:
        """The layer on an :class:`Adjacency`, after ``project`` (what :class:`GraphSAGE` calls).

        ``dropout``: the layer of ``torch.nn.functional.dropout(x_src, dropout)`` (``x_dst``, where it
        is x_src's leading rows, under the same mask), the mask read inside the op where
        :meth:`fuses_dropout`, else the dropped features made first."""
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout probability must be a number in [0, 1), got {dropout!r}")
        if dropout:
            if self.fuses_dropout(x_src):
                return self._fused(x_src, x_dst, self._mean(x_src, adj), float(dropout))
            x_src, x_dst = _dropped_inputs(x_src, x_dst, adj.num_rows, float(dropout))
        lazy = isinstance(self.lin_l.weight, nn.parameter.UninitializedParameter)
        if self.aggr in EXTREMES:
            return self._aggregate_first(x_src, x_dst, adj)
        adj = self._mean(x_src, adj)
        if lazy:
            return self._aggregate_first(x_src, x_dst, adj)
        if _is_sparse(x_src):
            return self._project_first(x_src, x_dst, adj)
        return self._fused(x_src, x_dst, adj)

    def _mean(self, x_src, adj: Adjacency) -> Adjacency:
        if self.aggr != "mean":
            return adj
        lazy = isinstance(self.lin_l.weight, nn.parameter.UninitializedParameter)
        return adj.mean(self.lin_l.weight.dtype if not lazy else
                        (x_src.dtype if x_src.is_floating_point() else torch.float32))

    def _fused(self, x_src: Tensor, x_dst, adj: Adjacency, dropout: float = 0.0) -> Tensor:
        """``ops.aggregate_transform``: aggregation, both projections and the bias in one op, in the
        cheaper order; the root term inside it where the targets' features lead the sources' (a
        graph, a sampled block), else added after; ``dropout``: the input dropout, inside the op."""
        if x_src.shape[0] != adj.num_cols:
            raise ValueError(f"the structure has {adj.num_cols} source nodes but the features have "
                             f"{x_src.shape[0]} rows")
        if adj.proof is not None:
            torch_ops.adopt(adj.proof, adj.indptr, adj.indices)  # a sampled block: valid by construction
        root = self.root_weight and x_dst is not None
        inside = root and _leads(x_dst, x_src, adj.num_rows)
        values, scale = adj.values, None
        if values is None and adj.reduce == "mean":
            scale = adj.row_scale(x_src.dtype)
        keep = draw_keep(x_src, dropout) if dropout else None
        out = aggregate_transform(adj.indptr, adj.indices, x_src, self.lin_l.weight, adj.num_cols, values=values,
                                  scale=scale, W_root=self.lin_r.weight if inside else None, bias=self.lin_l.bias,
                                  format=self.format, keep=keep, p=dropout)
        if root and not inside:
            out = out + _linear(F.dropout(x_dst, dropout) if dropout else x_dst, self.lin_r)
        return self._post(out)

    def _aggregate_first(self, x_src, x_dst, adj: Adjacency) -> Tensor:
        """``lin_l(A x_src) + lin_r(x_dst)``: the order PyG computes in."""
        if _is_sparse(x_src):
            x_src = x_src.to_dense()
        aggregated = _extreme(adj, x_src, self.aggr) if self.aggr in EXTREMES else _spmm(adj, x_src, self.format)
        return self._finish(self.lin_l(aggregated), x_dst)

    def _project_first(self, x_src, x_dst, adj: Adjacency) -> Tensor:
        """``A (x_src W_l^T) + b + W_r x_dst``: the aggregation over ``out_channels`` features."""
        if self.root_weight and x_dst is x_src:  # a graph: both projections in one product
            weight = torch.cat([self.lin_l.weight, self.lin_r.weight], dim=0)
            both = _sparse_matmul(x_src, weight) if _is_sparse(x_src) else F.linear(x_src, weight)
            projected, root = both[:, :self.out_channels], both[:, self.out_channels:]
            out = _spmm(adj, projected.contiguous(), self.format) + root
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
            return self._post(out)
        projected = _sparse_matmul(x_src, self.lin_l.weight) if _is_sparse(x_src) else F.linear(
            x_src, self.lin_l.weight)
        out = _spmm(adj, projected, self.format)
        if self.lin_l.bias is not None:
            out = out + self.lin_l.bias
        return self._finish(out, x_dst)

    def _finish(self, out: Tensor, x_dst) -> Tensor:
        if self.root_weight and x_dst is not None:
            out = out + _linear(x_dst, self.lin_r)
        return self._post(out)

    def _post(self, out: Tensor) -> Tensor:
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggr={self.aggr})"


def _leads(x_dst, x_src: Tensor, rows: int) -> bool:
    """Whether ``x_dst`` is the first ``rows`` rows of ``x_src`` (itself, or a view of it at the same
    place: what :class:`GraphSAGE` passes for a sampled block), so one op can take both."""
    if x_dst is x_src:
        return True
    if not isinstance(x_dst, Tensor) or _is_sparse(x_dst) or x_dst.shape[0] != rows:
        return False
    same_base = x_dst._base is not None and (x_dst._base is x_src or x_dst._base is x_src._base)
    return (same_base and x_dst.dtype == x_src.dtype and x_dst.shape[1:] == x_src.shape[1:]
            and x_dst.stride() == x_src.stride() and x_dst.data_ptr() == x_src.data_ptr())


def _dropped_inputs(x_src, x_dst, rows: int, p: float):
    """``dropout(x_src, p)``, and ``x_dst`` under the same mask where it is x_src's leading rows (else its own)."""
    dropped = F.dropout(x_src, p)
    if x_dst is x_src:
        return dropped, dropped
    if x_dst is not None and _leads(x_dst, x_src, rows):
        return dropped, dropped[:rows]
    return dropped, (F.dropout(x_dst, p) if x_dst is not None else None)


def _spmm(adj: Adjacency, x: Tensor, format: str = "csr") -> Tensor:
    if x.shape[0] != adj.num_cols:
        raise ValueError(f"the structure has {adj.num_cols} source nodes but the features have {x.shape[0]} rows")
    if adj.proof is not None:
        torch_ops.adopt(adj.proof, adj.indptr, adj.indices)  # a sampled block: valid by construction
    if adj.values is None and adj.reduce == "mean" and format == "csr":  # a row scale, no value array
        return torch.ops.sparsetir.spmm_row_scaled(adj.indptr, adj.indices, x.contiguous(), adj.row_scale(x.dtype),
                                                   adj.num_cols)
    return torch.ops.sparsetir.spmm(adj.indptr, adj.indices, adj.weights(x.dtype), x, adj.num_cols, False, format)


def _extreme(adj: Adjacency, x: Tensor, reduce: str) -> Tensor:
    """The max (min) of each target's in-neighbours' features, 0 for a target without any (PyG's)."""
    if x.shape[0] != adj.num_cols:
        raise ValueError(f"the structure has {adj.num_cols} source nodes but the features have {x.shape[0]} rows")
    if adj.proof is not None:
        torch_ops.adopt(adj.proof, adj.indptr, adj.indices)
    return torch.ops.sparsetir.spmm_reduce(adj.indptr, adj.indices, x.contiguous(), adj.num_cols, reduce)


def _make_linear(in_features: int, out_features: int, bias: bool) -> nn.Module:
    if in_features is None or in_features <= 0:
        return nn.LazyLinear(out_features, bias=bias)
    return nn.Linear(in_features, out_features, bias=bias)


def _reset_linear(layer: nn.Linear) -> None:
    fan_in = layer.weight.shape[1]
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5))
    if layer.bias is not None:
        nn.init.uniform_(layer.bias, -bound, bound)


ACTIVATIONS = {"relu": F.relu, "elu": F.elu, "gelu": F.gelu, "leaky_relu": F.leaky_relu, "tanh": torch.tanh,
               "sigmoid": torch.sigmoid}


class GraphSAGE(nn.Module):
    """``num_layers`` :class:`SAGEConv` layers (``in -> hidden -> ... -> out``), PyG ``GraphSAGE``'s
    arguments and state_dict keys (``convs.<i>.lin_l.weight``, ...).

    ``forward(x, edge_index)`` takes one structure for every layer (full-graph training: it is
    read and normalised once), or a list with one structure per layer (mini-batch blocks, as
    :class:`~sparsetir.nn.NeighborSampler` makes: each layer's targets are the first rows of its
    sources). ``act``: an activation name or callable after every layer but the last;
    ``dropout``: after each activation; ``dropout_in_aggregation``: in training mode the next layer
    applies that dropout inside its op (:meth:`SAGEConv.propagate`; the mask drawn by
    ``sparsetir.nn.dropout``'s generator, not torch's); other keyword arguments go to every
    :class:`SAGEConv`.
    """

    def __init__(self, in_channels: int, hidden_channels: int, num_layers: int, out_channels: int | None = None,
                 dropout: float = 0.0, act="relu", dropout_in_aggregation: bool = False, **kwargs):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout probability must be a number in [0, 1], got {dropout!r}")
        if isinstance(act, str) and act not in ACTIVATIONS:
            raise ValueError(f"act must be one of {', '.join(ACTIVATIONS)}, a callable or None; got {act!r}")
        self.in_channels, self.hidden_channels, self.num_layers = in_channels, hidden_channels, num_layers
        self.out_channels = hidden_channels if out_channels is None else out_channels
        self.dropout = float(dropout)
        self.dropout_in_aggregation = bool(dropout_in_aggregation)
        self.act = ACTIVATIONS[act] if isinstance(act, str) else act
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [self.out_channels]
        self.convs = nn.ModuleList(SAGEConv(widths[i], widths[i + 1], **kwargs) for i in range(num_layers))

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()

    def forward(self, x, edge_index) -> Tensor:
        if isinstance(edge_index, list):
            if len(edge_index) != self.num_layers:
                raise ValueError(f"{len(edge_index)} blocks for {self.num_layers} layers")
            structures = edge_index
        else:
            adj = as_adjacency(edge_index, x.shape[0])
            if all(conv.aggr == "mean" for conv in self.convs):
                adj = adj.mean(self._dtype(x))
            structures = [adj] * self.num_layers
        pending = 0.0  # a dropout of x that the next layer applies inside its op
        for i, (conv, structure) in enumerate(zip(self.convs, structures)):
            adj = as_adjacency(structure, x.shape[0])
            x_dst = _leading_rows(x, adj.num_rows) if isinstance(edge_index, list) else x  # targets lead sources
            x_src = _linear(x, conv.lin).relu() if conv.project else x
            x, pending = conv.propagate(x_src, x_dst, adj, dropout=pending), 0.0
            if i < self.num_layers - 1:
                if self.act is not None:
                    x = self.act(x)
                if self.dropout and self.training and self.dropout < 1.0 and self.dropout_in_aggregation \
                        and self.convs[i + 1].fuses_dropout(x):
                    pending = self.dropout
                elif self.dropout:
                    x = F.dropout(x, p=self.dropout, training=self.training)
        return x

    def _dtype(self, x) -> torch.dtype:
        weight = self.convs[0].lin_l.weight
        return weight.dtype if not isinstance(weight, nn.parameter.UninitializedParameter) else x.dtype

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, num_layers={self.num_layers})"
