"""GAT: :class:`GATConv` with PyG's arguments, semantics and ``state_dict``, on one fused op.

One layer is PyG's ``GATConv`` (Velickovic et al.)::

    h = x W  (heads x out_channels per node)
    alpha_ij = softmax_j(leaky_relu(att_src . h_j + att_dst . h_i))     over i's in-edges
    x'_i = concat_h or mean_h( sum_j dropout(alpha_ij) h_j ) (+ res(x_i)) + bias

The attention (scores, max-subtracted softmax per target, attention dropout, weighted sum) is
one op, ``sparsetir.ops.edge_softmax_aggregate`` (``torch.ops.sparsetir.edge_softmax_aggregate``,
with its backward): no per-edge tensor of width ``heads x out_channels`` is formed, where PyG
gathers one message per edge. The projections are torch's.

The structure (``forward``'s ``edge_index``) is any form :func:`~sparsetir.nn.as_adjacency`
takes: an edge list ``(2, E)`` (row 0 sources, row 1 targets), a PyG ``EdgeIndex``, an
``(indptr, indices)`` pair, a torch sparse CSR/COO tensor or a scipy matrix (both adj_t; their
values are ignored, as PyG's GAT ignores edge weights). Repeated edges are separate edges, as in
PyG. With ``add_self_loops`` every existing self-loop is removed and one added per node that is
both a source and a target (PyG's ``remove_self_loops`` then ``add_self_loops``). The prepared
structure is cached per edge list (its identity and version).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict

import torch
from torch import Tensor, nn

from ..ops.edge_softmax import edge_softmax_aggregate
from ..runtime.edge_softmax import with_self_loops
from .adjacency import as_adjacency
from .dropout import dropout
from .sage import _is_sparse, _sparse_matmul

__all__ = ["GATConv"]

#: PyG ``GATConv``/``MessagePassing`` arguments refused (by name) when given a value other than PyG's default.
UNSUPPORTED = {"edge_dim": None, "aggr": "add", "flow": "source_to_target", "node_dim": -2,
               "decomposed_layers": 1}
CACHED_STRUCTURES = 8


def _glorot(tensor: Tensor) -> None:
    """PyG's ``glorot``: uniform in +-sqrt(6 / (size(-2) + size(-1)))."""
    bound = math.sqrt(6.0 / (tensor.size(-2) + tensor.size(-1)))
    with torch.no_grad():
        tensor.uniform_(-bound, bound)


class GATConv(nn.Module):
    """The graph attention operator, as PyG's ``GATConv``.

    Parameters (PyG's, in its order)
    ----------
    in_channels : int or (int, int)
        Input features; a pair gives sources and targets their own projections (``lin_src``,
        ``lin_dst``), an int one shared ``lin``.
    out_channels : int
        Features per head.
    heads : int
    concat : bool
        Concatenate the heads (``heads * out_channels`` features) or average them.
    negative_slope : float
        The leaky ReLU's slope of the scores.
    dropout : float
        Dropout of the attention weights (training only).
    add_self_loops : bool
    edge_dim : None
        Edge features are not supported (any other value is refused by name).
    fill_value : any
        Accepted and unused, as in PyG without ``edge_dim``.
    bias : bool
    residual : bool
        Add a linear projection of the target features.

    sparsetir's keyword-only option: ``target`` (None: from the tensors' device). PyG's
    ``MessagePassing`` arguments are refused by name unless they are its defaults.

    ``state_dict`` keys and shapes are PyG's (``att_src``, ``att_dst``, ``bias``, ``lin.weight``
    or ``lin_src.weight``/``lin_dst.weight``, ``res.weight``), so ``load_state_dict`` from a PyG
    ``GATConv`` works, and :meth:`reset_parameters` draws as PyG's does (equal seeds, equal
    weights).
    """

    def __init__(self, in_channels, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True, edge_dim=None,
                 fill_value="mean", bias: bool = True, residual: bool = False, *, target=None, **kwargs):
        super().__init__()
        given = {"edge_dim": edge_dim, **kwargs}
        unknown = sorted(set(kwargs) - set(UNSUPPORTED))
        if unknown:
            raise TypeError(f"GATConv does not support the argument(s) {unknown}")
        refused = sorted(name for name, value in given.items() if value != UNSUPPORTED[name])
        if refused:
            raise ValueError(f"GATConv does not support {', '.join(f'{n}={given[n]!r}' for n in refused)} (PyG's "
                             "defaults only: no edge features, sum aggregation, flow='source_to_target')")
        sources, targets = (in_channels, in_channels) if isinstance(in_channels, int) else tuple(in_channels)
        for name, value in (("in_channels", sources), ("in_channels (targets)", targets), ("out_channels", out_channels),
                            ("heads", heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int (lazy -1 is not supported), got {value!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if not math.isfinite(float(negative_slope)):
            raise ValueError(f"negative_slope must be finite, got {negative_slope!r}")
        self.in_channels, self.out_channels, self.heads, self.concat = in_channels, out_channels, heads, bool(concat)
        self.negative_slope, self.dropout = float(negative_slope), float(dropout)
        self.add_self_loops, self.edge_dim, self.fill_value, self.residual = bool(add_self_loops), None, fill_value, \
            bool(residual)
        self.target = target
        width = heads * out_channels
        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = nn.Linear(sources, width, bias=False)
        else:
            self.lin_src = nn.Linear(sources, width, bias=False)
            self.lin_dst = nn.Linear(targets, width, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        total = out_channels * (heads if concat else 1)
        self.res = nn.Linear(targets, total, bias=False) if residual else None
        if bias:
            self.bias = nn.Parameter(torch.empty(total))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's initialisation, in its order: glorot projections, ``res``, ``att_src``, ``att_dst``; zero bias."""
        for layer in (self.lin, self.lin_src, self.lin_dst, self.res):
            if layer is not None:
                _glorot(layer.weight)
        _glorot(self.att_src)
        _glorot(self.att_dst)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x, edge_index, edge_attr=None, size: tuple[int, int] | None = None,
                return_attention_weights: bool | None = None):
        """``x``: ``(nodes, in)`` or a ``(sources, targets)`` pair (targets may be None); ``size``:
        ``(sources, targets)`` where the features do not say. Returns ``(targets, heads * out)``
        (``concat``) or ``(targets, out)``; with ``return_attention_weights`` also
        ``(edge_index, alpha)``: the edges attended over (self-loops as added) in the layer's own
        order (by target) and their weights ``(E, heads)``. Features may be a torch sparse CSR (or
        COO) tensor (bag-of-words features are mostly zeros): the projections are then SpMMs."""
        if edge_attr is not None:
            raise ValueError("GATConv does not support edge_attr (edge features need edge_dim, which is not supported)")
        H, C = self.heads, self.out_channels
        if isinstance(x, Tensor):
            x_src, x_dst = x, None
            if x.dim() != 2:
                raise ValueError(f"x must be (nodes, in_channels), got shape {tuple(x.shape)}")
            if self.lin is not None:
                h_src = h_dst = _project(x, self.lin).view(-1, H, C)
            else:
                h_src, h_dst = _project(x, self.lin_src).view(-1, H, C), _project(x, self.lin_dst).view(-1, H, C)
            x_dst = x
        elif isinstance(x, (tuple, list)) and len(x) == 2:
            x_src, x_dst = x
            if not isinstance(x_src, Tensor) or x_src.dim() != 2:
                raise ValueError("x[0] (the sources' features) must be a 2-D tensor")
            lin_src, lin_dst = (self.lin, self.lin) if self.lin is not None else (self.lin_src, self.lin_dst)
            h_src = _project(x_src, lin_src).view(-1, H, C)
            h_dst = None if x_dst is None else _project(x_dst, lin_dst).view(-1, H, C)
        else:
            raise TypeError(f"x must be a tensor or a (sources, targets) pair, got {type(x).__name__}")
        num_sources = h_src.shape[0] if size is None else int(size[0])
        num_targets = (h_dst.shape[0] if h_dst is not None else num_sources) if size is None else int(size[1])
        if size is None and h_dst is None and isinstance(x, (tuple, list)):  # PyG: the largest target id + 1,
            num_targets = _targets_of(edge_index, num_sources)  # and a self-loop for every source
            if self.add_self_loops:
                num_targets = max(num_targets, num_sources)
        indptr, indices = _prepared(edge_index, num_sources, num_targets, self.add_self_loops)
        a_src = (h_src * self.att_src).sum(dim=-1)
        a_dst = (h_dst * self.att_dst).sum(dim=-1) if h_dst is not None else h_src.new_zeros((num_targets, H))
        mask = None
        if self.dropout > 0.0 and self.training:
            mask = dropout(h_src.new_ones((indices.shape[0], H)), p=self.dropout, training=True)
        out, alpha = edge_softmax_aggregate(indptr, indices, h_src.contiguous(), a_src.contiguous(), a_dst.contiguous(),
                                            negative_slope=self.negative_slope, mask=mask, target=self.target)
        out = out.reshape(-1, H * C) if self.concat else out.mean(dim=1)
        if self.res is not None:
            if x_dst is None:
                raise ValueError("residual=True needs the targets' features (x[1])")
            out = out + _project(x_dst, self.res)
        if self.bias is not None:
            out = out + self.bias
        if return_attention_weights:
            rows = torch.repeat_interleave(torch.arange(indptr.shape[0] - 1, device=indptr.device), indptr.diff(),
                                           output_size=indices.shape[0])
            return out, (torch.stack([indices, rows]), alpha)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"


def _project(x: Tensor, layer: nn.Linear) -> Tensor:
    """``layer(x)`` (no bias); for sparse CSR/COO features an SpMM (``torch.ops.sparsetir.spmm``)."""
    return _sparse_matmul(x, layer.weight) if _is_sparse(x) else layer(x)


def _targets_of(edge_index, num_sources: int) -> int:
    """The targets of a structure given with sources only (PyG: the largest target id + 1)."""
    if isinstance(edge_index, Tensor) and edge_index.layout == torch.strided and edge_index.dim() == 2 \
            and edge_index.shape[0] == 2:
        return int(edge_index[1].max()) + 1 if edge_index.shape[1] else 0
    return as_adjacency(edge_index, num_sources).num_rows


# --- the structure: CSR of adj_t with PyG's self-loop handling, cached per edge list ------------

_CACHE: OrderedDict = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _identity(edge_index) -> tuple | None:
    """Weak references and versions of the tensors a structure is made of (None: not cacheable)."""
    tensors = edge_index if isinstance(edge_index, tuple) else (edge_index,)
    if not tensors or not all(isinstance(t, Tensor) and t.layout == torch.strided for t in tensors):
        return None
    return tuple((weakref.ref(t), t._version) for t in tensors)


def _prepared(edge_index, num_sources: int, num_targets: int, add_loops: bool) -> tuple[Tensor, Tensor]:
    """``(indptr, indices)`` of adj_t (int64, on the structure's device) after PyG's self-loop rule."""
    identity = _identity(edge_index)
    key = (num_sources, num_targets, add_loops)
    if identity is not None:
        with _CACHE_LOCK:
            for entry_key, (held, other, result) in reversed(_CACHE.items()):
                if other == key and len(held) == len(identity) and all(
                        ref() is now() and version == now_version
                        for (ref, version), (now, now_version) in zip(held, identity)):
                    _CACHE.move_to_end(entry_key)
                    return result
    adj = as_adjacency(edge_index, num_sources, num_targets)
    if adj.num_rows != num_targets or adj.num_cols != num_sources:
        raise ValueError(f"the structure is {adj.num_rows} targets x {adj.num_cols} sources, but the features give "
                         f"{num_targets} targets and {num_sources} sources")
    indptr, indices = adj.indptr.to(torch.int64), adj.indices.to(torch.int64)
    if add_loops:
        indptr, indices = _with_self_loops(indptr, indices, min(num_sources, num_targets))
    result = (indptr, indices)
    if identity is not None:
        with _CACHE_LOCK:
            _CACHE[id(result)] = (identity, key, result)
            while len(_CACHE) > CACHED_STRUCTURES:
                _CACHE.popitem(last=False)
    return result


def _with_self_loops(indptr: Tensor, indices: Tensor, loops: int) -> tuple[Tensor, Tensor]:
    """Every entry ``(i, i)`` removed, then one ``(i, i)`` for ``i < loops`` appended to its row
    (``runtime.edge_softmax.with_self_loops``, on the structure's device)."""
    ptr, idx = with_self_loops(indptr.cpu().numpy(), indices.cpu().numpy(), loops)
    return torch.from_numpy(ptr).to(indptr.device), torch.from_numpy(idx).to(indptr.device)
