"""R-GCN: :class:`RGCNConv` with PyG's arguments, semantics and ``state_dict``, trainable, and :class:`RGCN`.

One layer is PyG's ``RGCNConv``::

    x'_i = root x_i  +  sum_r agg_{e = (j -> i) of relation r} W_r x_j  +  bias

with ``agg`` the mean (each relation's edges into ``i`` counted, repeated edges included: a
multigraph's duplicate edges each count, as in PyG) or the sum (``aggr="sum"``/``"add"``). ``W_r``
is a full matrix, or ``sum_b comp[r, b] V_b`` (``num_bases``), or block-diagonal (``num_blocks``).

How each case runs (every kernel is differentiable, so the layer trains):

- **features** (a float ``x``): one RGMS (``torch.ops.sparsetir.rgms``, ``ops.compile_rgms``'s
  formats and dataflows; ``format="auto"`` uses the tuning database) over the relations, the
  root weight fused in as one more relation (the identity) when the layer maps a graph onto
  itself; bases and blocks give the dense ``W_r`` first (a small product).
- **featureless** (``x=None``: node ``j``'s input is its one-hot vector, so a message is the row
  ``W_r[j]``; or an index tensor ``x``: the row ``W_r[x[j]]``): one SpMM over the relations
  stacked side by side, ``[A_0 | A_1 | ...] @ W.view(R * N, out)``. With bases no ``(R, N, out)``
  weight is formed: ``sum_r A_r W_r = sum_b (sum_r comp[r, b] A_r) V_b``, so an SpMM computes each
  (target, source) pair's coefficients ``c_b = sum_r comp[r, b] a_r`` from ``comp``, and one more
  SpMM sums ``c_b V_b[j]`` over the pairs and bases.

The structure (``forward``'s ``edge_index``) is ``edge_index (2, E)`` (or a PyG ``EdgeIndex``) with
``edge_type (E,)``, or, as a second form, a relational input without ``edge_type``: a list of R
sparse matrices (``A_r[i, j]`` the number of edges ``j -> i`` of relation ``r``), a
``sparsetir.data.load_relational`` graph (every triple one edge) or an :class:`RGCNGraph`. Each
is validated and converted once (cached by the tensors' identity, then their content).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..formats.matrix import INT32_LIMIT
from ..formats.relational import RelationalMatrix, read_relational_input
from ..ops.torch_rgms import rgms_kernels, rgms_torch  # registers torch.ops.sparsetir.*

__all__ = ["AGGREGATIONS", "RGCN", "RGCNConv", "RGCNGraph"]

AGGREGATIONS = ("mean", "sum", "add")
#: PyG ``RGCNConv`` keyword arguments accepted without effect: ``is_sorted`` is a speed hint there.
IGNORED_PYG_ARGUMENTS = ("is_sorted",)
CACHED_GRAPHS = 8


class RGCNGraph:
    """A relational graph prepared for R-GCN layers: ``num_relations`` relations of edges
    ``source -> target`` over ``num_sources`` sources and ``num_targets`` targets, repeated edges
    kept as counts (PyG counts every edge).

    Build it from ``edge_index``/``edge_type`` (:meth:`from_edges`) or from a relational input
    (the constructor): a list of R scipy/torch sparse matrices (``A_r[i, j]``: the number of edges
    ``j -> i`` of relation ``r``; a pattern's ones are one edge each), a
    ``sparsetir.data.load_relational`` graph (every triple one edge ``subject -> object``) or a
    ``formats.relational.RelationalMatrix``. The structures the layers run on are derived from it
    on first use and kept (per device, aggregation and input kind).
    """

    def __init__(self, adj=None, *, num_relations: int | None = None, _edges=None):
        if _edges is None:
            relation, target, source, count, shape, relations = _relational_edges(adj)
        else:
            relation, target, source, count, shape, relations = _edges
        if num_relations is not None and num_relations != relations:
            raise ValueError(f"the graph has {relations} relations, expected num_relations={num_relations}")
        self.num_relations = int(relations)
        self.num_targets, self.num_sources = (int(s) for s in shape)
        order = np.lexsort((source, target, relation))  # relation-major stacked CSR order
        relation, target, source, count = relation[order], target[order], source[order], count[order]
        keep = np.ones(relation.size, dtype=bool)  # repeated (relation, target, source): one entry, counts summed
        if relation.size:
            keep[1:] = (np.diff(relation) != 0) | (np.diff(target) != 0) | (np.diff(source) != 0)
        starts = np.flatnonzero(keep)
        self.count = np.add.reduceat(count, starts) if starts.size else np.zeros(0, np.float64)
        self.relation, self.target, self.source = relation[starts], target[starts], source[starts]
        self.num_edges = int(round(float(self.count.sum())))
        self._derived: dict = {}
        self._lock = threading.RLock()

    @classmethod
    def from_edges(cls, edge_index, edge_type, num_relations: int, size: tuple[int, int]) -> RGCNGraph:
        """The graph of PyG's inputs: ``edge_index (2, E)`` (row 0 sources, row 1 targets) and
        ``edge_type (E,)`` in ``[0, num_relations)``, over ``size = (sources, targets)`` nodes."""
        source, target, relation = _check_edges(edge_index, edge_type, num_relations, size)
        return cls(_edges=(relation, target, source, np.ones(source.size, np.float64), (size[1], size[0]),
                           num_relations))

    @property
    def num_nodes(self) -> int:
        return self.num_targets

    # --- values -------------------------------------------------------------------------------
    def _values(self, aggr: str) -> np.ndarray:
        """Each entry's weight: its count, divided by its (relation, target)'s edge count for the mean."""
        if aggr != "mean":
            return self.count
        key = self.relation * max(self.num_targets, 1) + self.target
        degree = np.bincount(key, weights=self.count, minlength=self.num_relations * self.num_targets)
        return self.count / degree[key] if key.size else self.count

    def _cached(self, key, build):
        with self._lock:
            if key not in self._derived:
                self._derived[key] = build()
            return self._derived[key]

    # --- structures ---------------------------------------------------------------------------
    def relational(self, aggr: str = "mean", *, root: bool = False, device="cpu",
                   dtype=torch.float32) -> tuple[Tensor, Tensor, Tensor]:
        """``(indptr, indices, values)`` of the relation-major stacking that ``torch.ops.sparsetir.rgms``
        takes (values in ``dtype``); ``root``: the identity appended as relation ``num_relations``
        (the root weight's term ``x_i root``, for a graph: sources = targets)."""
        def build():
            matrix = self.relational_matrix(aggr, root=root)
            indptr, indices = (torch.from_numpy(np.asarray(a)).to(device) for a in (matrix.indptr, matrix.indices))
            if dtype != torch.float64:  # one structure (index tensors) for every dtype
                indptr, indices, _ = self.relational(aggr, root=root, device=device, dtype=torch.float64)
            return indptr, indices, torch.from_numpy(np.asarray(matrix.values)).to(device, dtype)
        return self._cached(("relational", aggr, root, str(device), dtype), build)

    def relational_matrix(self, aggr: str = "mean", *, root: bool = False) -> RelationalMatrix:
        """The relations as a ``formats.relational.RelationalMatrix`` (what ``ops.rgms`` compiles for)."""
        def build():
            m, n, R = self.num_targets, self.num_sources, self.num_relations
            values = self._values(aggr)
            stacked = self.relation * m + self.target
            indices, weights = self.source, values
            relations = R
            if root:
                if m != n:
                    raise ValueError(f"the root weight as a relation needs sources = targets, got {n} and {m}")
                stacked = np.concatenate([stacked, R * m + np.arange(m, dtype=np.int64)])
                indices = np.concatenate([indices, np.arange(m, dtype=np.int64)])
                weights = np.concatenate([weights, np.ones(m)])
                relations = R + 1
            # int32 indices where they fit (the kernels' index dtype): the stacked indptr has R*m+1 entries, often
            # many more than the edges, and the ops keep this array as the structure (no narrowed copy of it)
            index_dtype = np.int32 if max(relations * m + 1, indices.size, n) <= INT32_LIMIT else np.int64
            indptr = np.zeros(relations * m + 1, dtype=index_dtype)
            np.cumsum(np.bincount(stacked, minlength=relations * m), out=indptr[1:])
            return RelationalMatrix((m, n), relations, indptr, indices.astype(index_dtype), weights.astype(np.float64))
        return self._cached(("matrix", aggr, root), build)

    def used_rows(self, aggr: str, num_inputs: int, index: np.ndarray | None = None, device="cpu",
                  dtype=torch.float32) -> dict:
        """The featureless layer's structure: the weight rows its messages use and how they add up.

        A message of an edge ``j -> i`` of relation ``r`` is row ``u = index[j]`` of ``W_r``. The
        distinct ``(r, u)`` pairs are the *used rows* (``rows``: ``r * num_inputs + u``, sorted); ``A``
        (targets x used rows, CSR ``indptr``, ``indices``, ``values`` in ``dtype``) sums them:
        ``out = A @ W_used``."""
        def build():
            inputs = self.source if index is None else index[self.source]
            keys = self.relation * num_inputs + inputs
            rows, used_of = np.unique(keys, return_inverse=True)
            indptr, indices, values = _csr_tensors(self.target, used_of, self._values(aggr), self.num_targets,
                                                   device, num_cols=rows.size)
            return {"rows": torch.from_numpy(rows).to(device), "relation": rows // max(num_inputs, 1),
                    "input": rows % max(num_inputs, 1), "indptr": indptr, "indices": indices,
                    "values": values.to(dtype)}
        return self._cached(("used", aggr, num_inputs, _index_key(index), str(device), dtype), build)

    def basis_rows(self, aggr: str, num_inputs: int, num_bases: int, index: np.ndarray | None = None,
                   device="cpu") -> dict:
        """The used rows of a basis decomposition: ``W_used[q] = sum_b comp[r_q, b] V_b[u_q]``, an SpMM
        ``M @ V.view(B * num_inputs, out)`` whose values are entries of ``comp``.

        ``M`` (used rows x ``B * num_inputs``): row ``q`` holds ``comp[r_q, b]`` at column
        ``b * num_inputs + u_q``, the value at ``comp.view(-1)[M_values_at]``; ``MT`` is its transpose
        (for ``dV = M^T dW_used``), values at ``comp.view(-1)[MT_values_at]``."""
        def build():
            used = self.used_rows(aggr, num_inputs, index, device)
            relation, inputs = used["relation"], used["input"]
            Q, B = relation.size, num_bases
            bases = np.arange(B, dtype=np.int64)
            M_indptr = np.arange(Q + 1, dtype=np.int64) * B
            M_indices = (bases[None, :] * num_inputs + inputs[:, None]).reshape(-1)
            M_values_at = (relation[:, None] * B + bases[None, :]).reshape(-1)
            order = np.argsort(M_indices, kind="stable")  # M's entries by column: M^T's CSR order
            MT_indptr = np.zeros(B * num_inputs + 1, dtype=np.int64)
            np.cumsum(np.bincount(M_indices, minlength=B * num_inputs), out=MT_indptr[1:])
            MT_indices = order // B
            arrays = {"M_indptr": M_indptr, "M_indices": M_indices, "M_values_at": M_values_at,
                      "MT_indptr": MT_indptr, "MT_indices": MT_indices, "MT_values_at": M_values_at[order]}
            return {name: torch.from_numpy(np.ascontiguousarray(a)).to(device) for name, a in arrays.items()}
        return self._cached(("basis", aggr, num_inputs, num_bases, _index_key(index), str(device)), build)

    # --- what the benchmarks and the GPU bundle read -------------------------------------------
    @property
    def matrix(self) -> RelationalMatrix:
        """The mean-normalised relations with the root's identity relation last (float32): what a
        square layer's RGMS runs on (the benchmark tunes it, the GPU bundle compiles it)."""
        full = self.relational_matrix("mean", root=True)
        return RelationalMatrix(full.shape, full.num_relations, full.indptr, full.indices,
                                full.values.astype(np.float32))

    @property
    def kernels(self) -> dict:
        """The forward RGMS kernels compiled for this graph's relational structures so far."""
        found = {}
        for key, structure in list(self._derived.items()):
            if key[0] == "relational":
                indptr, indices, _values = structure
                for kernel in rgms_kernels(indptr, indices, self.num_sources):
                    found[id(kernel)] = kernel
        return found

    def __repr__(self) -> str:
        return (f"RGCNGraph({self.num_relations} relations, {self.num_sources} sources, {self.num_targets} targets, "
                f"{self.num_edges} edges)")


def _index_key(index):
    return None if index is None else (index.shape[0], hash(index.tobytes()))


def _csr_tensors(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, num_rows: int, device,
                 num_cols: int | None = None) -> tuple:
    """CSR tensors of the entries ``(rows, cols, values)``, repeated coordinates summed (sorted rows)."""
    num_cols = (int(cols.max()) + 1 if cols.size else 1) if num_cols is None else max(int(num_cols), 1)
    matrix = sp.csr_matrix((np.asarray(values, dtype=np.float64), (rows, cols)), shape=(num_rows, num_cols))
    matrix.sum_duplicates()
    matrix.sort_indices()
    return tuple(torch.from_numpy(np.asarray(a, dtype=dtype)).to(device)
                 for a, dtype in ((matrix.indptr, np.int64), (matrix.indices, np.int64), (matrix.data, np.float64)))


def _host(tensor: Tensor) -> np.ndarray:
    return tensor.detach().to("cpu", torch.int64).numpy()


def _check_edges(edge_index, edge_type, num_relations: int, size) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sources, targets, relations) as int64 host arrays, every id checked against its range."""
    if type(edge_index).__name__ == "EdgeIndex" and hasattr(edge_index, "as_tensor"):
        edge_index = edge_index.as_tensor()
    if not isinstance(edge_index, Tensor) or edge_index.layout != torch.strided:
        raise TypeError(f"edge_index must be a dense (2, E) tensor, got {type(edge_index).__name__}")
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
    if not isinstance(edge_type, Tensor):
        raise TypeError("edge_index needs edge_type: a (E,) tensor of relation ids (or pass a relational input "
                        f"such as a list of sparse matrices without edge_type), got {type(edge_type).__name__}")
    for name, tensor in (("edge_index", edge_index), ("edge_type", edge_type)):
        if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
            raise TypeError(f"{name} must have an integer dtype, got {tensor.dtype}")
    if edge_type.dim() != 1 or edge_type.shape[0] != edge_index.shape[1]:
        raise ValueError(f"edge_type must have one relation id per edge: shape ({edge_index.shape[1]},), got "
                         f"{tuple(edge_type.shape)}")
    host = _host(edge_index)
    relation = _host(edge_type)
    for what, ids, extent in (("edge_type", relation, num_relations), ("edge_index[0] (sources)", host[0], size[0]),
                              ("edge_index[1] (targets)", host[1], size[1])):
        bad = (ids < 0) | (ids >= extent)
        if bad.any():
            k = int(np.argmax(bad))
            noun = "relation id" if what == "edge_type" else "node id"
            raise ValueError(f"{what}[{k}] = {int(ids[k])} is not a {noun} in [0, {extent})")
    return host[0].copy(), host[1].copy(), relation.copy()


def _relational_edges(adj):
    """(relation, target, source, count, (targets, sources), relations) of a relational input."""
    if hasattr(adj, "predicates") and hasattr(adj, "num_entities"):  # a RelationalGraph: every triple an edge
        n = int(adj.num_entities)
        relation = np.asarray(adj.predicates, dtype=np.int64)
        return (relation, np.asarray(adj.objects, dtype=np.int64), np.asarray(adj.subjects, dtype=np.int64),
                np.ones(relation.size, np.float64), (n, n), len(adj.relations))
    matrix = read_relational_input(adj)
    relation, target, source = matrix.coordinates()
    count = np.asarray(matrix.values, dtype=np.float64)
    if count.size and (not np.all(np.isfinite(count)) or count.min() < 0 or np.any(count != np.round(count))):
        bad = int(np.argmax(~np.isfinite(count) | (count < 0) | (count != np.round(count))))
        raise ValueError(f"a relational input's entries count edges (whole numbers >= 0); entry {bad} of relation "
                         f"{int(relation[bad])} is {count[bad]}")
    keep = count > 0  # an explicit zero is no edge
    return relation[keep], target[keep], source[keep], count[keep], matrix.shape, matrix.num_relations


_GRAPHS: OrderedDict = OrderedDict()  # (edge_index, edge_type) -> RGCNGraph, by identity, then content
_GRAPHS_LOCK = threading.Lock()


def _graph_of(edge_index, edge_type, num_relations: int, size: tuple[int, int]) -> RGCNGraph:
    """The :class:`RGCNGraph` of a layer's structure argument, converted once per structure."""
    if isinstance(edge_index, RGCNGraph):
        graph = edge_index
        if edge_type is not None:
            raise ValueError("an RGCNGraph carries its relations: pass edge_type=None")
    elif isinstance(edge_index, Tensor) and edge_index.layout == torch.strided:
        graph = _cached_edges(edge_index, edge_type, num_relations, size)
    else:
        if edge_type is not None:
            raise ValueError("a relational input (a list of sparse matrices, a relational graph) carries its "
                             "relations: pass edge_type=None")
        graph = _cached_relational(edge_index)
    if graph.num_relations != num_relations:
        raise ValueError(f"this layer has {num_relations} relations, the graph {graph.num_relations}")
    if (graph.num_sources, graph.num_targets) != tuple(size):
        raise ValueError(f"the graph has {graph.num_sources} sources and {graph.num_targets} targets, but the "
                         f"features give {size[0]} and {size[1]}")
    return graph


def _cached_edges(edge_index: Tensor, edge_type, num_relations: int, size) -> RGCNGraph:
    key_size = (num_relations, tuple(size))
    with _GRAPHS_LOCK:
        for key, (refs, versions, copies, other, graph) in reversed(_GRAPHS.items()):
            if other != key_size or copies is None:
                continue
            same = (refs[0]() is edge_index and refs[1]() is edge_type
                    and versions == (edge_index._version, getattr(edge_type, "_version", None)))
            if same or (isinstance(edge_type, Tensor) and _equal(copies[0], edge_index)
                        and _equal(copies[1], edge_type)):
                _GRAPHS.move_to_end(key)
                return graph
    graph = RGCNGraph.from_edges(edge_index, edge_type, num_relations, size)
    entry = ((weakref.ref(edge_index), weakref.ref(edge_type)), (edge_index._version, edge_type._version),
             (edge_index.detach().clone(), edge_type.detach().clone()), key_size, graph)
    _remember(entry)
    return graph


def _cached_relational(adj) -> RGCNGraph:
    with _GRAPHS_LOCK:
        for key, (held, _v, copies, _o, graph) in reversed(_GRAPHS.items()):
            if copies is None and held is adj:
                _GRAPHS.move_to_end(key)
                return graph
    graph = RGCNGraph(adj)
    _remember((adj, None, None, None, graph))  # held strongly: a list cannot be weakly referenced
    return graph


def _remember(entry) -> None:
    with _GRAPHS_LOCK:
        _GRAPHS[id(entry)] = entry
        while len(_GRAPHS) > CACHED_GRAPHS:
            _GRAPHS.popitem(last=False)


def _equal(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)


def _glorot(tensor: Tensor | None) -> None:
    """PyG's ``glorot``: uniform in +-sqrt(6 / (size(-2) + size(-1))) (the same draw)."""
    if tensor is not None:
        bound = math.sqrt(6.0 / (tensor.size(-2) + tensor.size(-1)))
        tensor.data.uniform_(-bound, bound)


class RGCNConv(nn.Module):
    """The relational graph convolution (Schlichtkrull et al.), as PyG's ``RGCNConv``.

    Parameters (PyG's, in its order)
    ----------
    in_channels : int or (int, int)
        Input features (sources, targets); for featureless input (``x=None``) the number of nodes.
    out_channels : int
    num_relations : int
    num_bases : int, optional
        Basis decomposition: ``weight (num_bases, in, out)`` and ``comp (num_relations, num_bases)``.
    num_blocks : int, optional
        Block-diagonal decomposition: ``weight (num_relations, num_blocks, in / blocks, out / blocks)``.
    aggr : str
        ``"mean"`` (default), ``"sum"`` or ``"add"``. PyG's ``"max"`` is refused.
    root_weight : bool
        Add ``x_i root``.
    bias : bool

    sparsetir's keyword-only options: ``format`` (the relational format of the RGMS kernels:
    None for ``ops.compile_rgms``'s default, ``"csf"``, ``"relcsr"``, ``"auto"``) and ``target``
    (None: from the tensors' device). ``is_sorted`` (PyG's speed hint) is accepted and ignored;
    any other PyG argument is refused by name.

    ``state_dict`` keys and shapes are PyG's (``weight``, ``comp``, ``root``, ``bias``), and
    :meth:`reset_parameters` draws as PyG's does, so equal seeds give equal weights.
    """

    def __init__(self, in_channels, out_channels: int, num_relations: int, num_bases: int | None = None,
                 num_blocks: int | None = None, aggr: str = "mean", root_weight: bool = True, bias: bool = True, *,
                 format=None, target=None, **kwargs):
        super().__init__()
        unknown = sorted(set(kwargs) - set(IGNORED_PYG_ARGUMENTS))
        if unknown:
            raise TypeError(f"RGCNConv does not support the argument(s) {unknown}; it takes PyG RGCNConv's "
                            "in_channels, out_channels, num_relations, num_bases, num_blocks, aggr, root_weight, "
                            "is_sorted (ignored) and bias, plus format= and target=")
        if not isinstance(aggr, str) or aggr not in AGGREGATIONS:
            raise ValueError(f"RGCNConv aggregates with {', '.join(AGGREGATIONS)}; got aggr={aggr!r}")
        if num_bases is not None and num_blocks is not None:
            raise ValueError("Can not apply both basis-decomposition and block-diagonal-decomposition at the "
                             "same time.")
        sources, targets = (in_channels, in_channels) if isinstance(in_channels, int) else tuple(in_channels)
        for name, value in (("in_channels", sources), ("in_channels (targets)", targets),
                            ("out_channels", out_channels), ("num_relations", num_relations),
                            ("num_bases", num_bases), ("num_blocks", num_blocks)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.in_channels, self.out_channels, self.num_relations = in_channels, out_channels, num_relations
        self.num_bases, self.num_blocks, self.aggr = num_bases, num_blocks, aggr
        self.in_channels_l = sources
        self.format, self.target = format, target
        if num_bases is not None:
            self.weight = nn.Parameter(torch.empty(num_bases, sources, out_channels))
            self.comp = nn.Parameter(torch.empty(num_relations, num_bases))
        elif num_blocks is not None:
            if sources % num_blocks or out_channels % num_blocks:
                raise ValueError(f"num_blocks={num_blocks} must divide in_channels ({sources}) and out_channels "
                                 f"({out_channels})")
            self.weight = nn.Parameter(torch.empty(num_relations, num_blocks, sources // num_blocks,
                                                   out_channels // num_blocks))
            self.register_parameter("comp", None)
        else:
            self.weight = nn.Parameter(torch.empty(num_relations, sources, out_channels))
            self.register_parameter("comp", None)
        if root_weight:
            self.root = nn.Parameter(torch.empty(targets, out_channels))
        else:
            self.register_parameter("root", None)
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's initialisation, in its order: glorot ``weight``, ``comp``, ``root``; zero ``bias``."""
        _glorot(self.weight)
        _glorot(self.comp)
        _glorot(self.root)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def relation_weights(self) -> Tensor:
        """``W (num_relations, in, out)``: the dense weight of every relation (bases combined,
        blocks laid on the diagonal)."""
        R, out = self.num_relations, self.out_channels
        if self.num_bases is not None:
            return (self.comp @ self.weight.reshape(self.num_bases, -1)).reshape(R, self.in_channels_l, out)
        if self.num_blocks is not None:
            blocks = self.num_blocks
            eye = torch.eye(blocks, dtype=self.weight.dtype, device=self.weight.device)
            return torch.einsum("rbio,bc->rbico", self.weight, eye).reshape(R, self.in_channels_l, out)
        return self.weight

    def forward(self, x, edge_index, edge_type: Tensor | None = None) -> Tensor:
        """``x``: node features ``(n, in)``, an index tensor (node ``j``'s input is row ``x[j]`` of
        each weight), None (featureless: node ``j`` is its own index), or a (sources, targets) pair
        of those; ``edge_index``/``edge_type``: see the module docstring. Returns ``(targets, out)``."""
        x_l, x_r = x if isinstance(x, tuple) else (x, x)
        if isinstance(x, tuple) and x_r is None:
            raise ValueError("a (sources, targets) pair needs the targets' features or indices (x[1])")
        for name, value in (("x", x_l), ("x (targets)", x_r)):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"{name} must be a tensor or None, got {type(value).__name__}")
        num_sources = self.in_channels_l if x_l is None else int(x_l.shape[0])
        num_targets = num_sources if x_r is None else int(x_r.shape[0])
        graph = _graph_of(edge_index, edge_type, self.num_relations, (num_sources, num_targets))
        featured = x_l is not None and x_l.is_floating_point()
        if featured:
            out, root_done = self._aggregate_features(graph, x_l, x_r)
        else:
            out, root_done = self._aggregate_rows(graph, x_l), False
        if self.root is not None and not root_done:
            if x_r is None:
                out = out + self.root
            elif x_r.is_floating_point():
                out = out + x_r @ self.root
            else:
                out = out + self.root[_index(x_r, self.root.shape[0], "x (targets)")]
        if self.bias is not None:
            out = out + self.bias
        return out

    def _aggregate_features(self, graph: RGCNGraph, x_l: Tensor, x_r) -> tuple[Tensor, bool]:
        if x_l.dim() != 2 or x_l.shape[1] != self.in_channels_l:
            raise ValueError(f"x must be (nodes, {self.in_channels_l}) for this layer, got {tuple(x_l.shape)}")
        if x_l.dtype != self.weight.dtype:
            raise TypeError(f"x is {x_l.dtype} but the layer's weights are {self.weight.dtype}")
        weights = self.relation_weights()
        fuse_root = self.root is not None and x_r is x_l and graph.num_sources == graph.num_targets
        if fuse_root:
            weights = torch.cat([weights, self.root[None]])
        indptr, indices, values = graph.relational(self.aggr, root=fuse_root, device=x_l.device, dtype=x_l.dtype)
        out = rgms_torch(indptr, indices, values, x_l.contiguous(), weights.contiguous(),
                         graph.num_sources, format=self.format, target=self.target)
        return out, fuse_root

    def _aggregate_rows(self, graph: RGCNGraph, x_l) -> Tensor:
        """Featureless input: each message is a row of a weight (see the module docstring)."""
        if self.num_blocks is not None:
            raise ValueError("Block-diagonal decomposition not supported for non-continuous input features.")
        inputs, weight, out = self.in_channels_l, self.weight, self.out_channels
        index = None if x_l is None else _host(_index(x_l, inputs, "x"))
        used = graph.used_rows(self.aggr, inputs, index, weight.device, weight.dtype)
        if used["rows"].numel() == 0:
            return weight.new_zeros((graph.num_targets, out))
        if self.num_bases is not None:
            basis = graph.basis_rows(self.aggr, inputs, self.num_bases, index, weight.device)
            rows = _BasisRows.apply(self.comp, weight.reshape(self.num_bases * inputs, out), basis)
        else:
            rows = weight.reshape(self.num_relations * inputs, out).index_select(0, used["rows"])
        return torch.ops.sparsetir.spmm(used["indptr"], used["indices"], used["values"], rows.contiguous(),
                                        rows.shape[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, num_relations={self.num_relations})"


class _BasisRows(torch.autograd.Function):
    """``W_used = M @ V`` with ``M``'s values the entries of ``comp`` (``RGCNGraph.basis_rows``): the
    used rows of ``sum_b comp[r, b] V_b``, never forming the ``(relations, inputs, out)`` weight.

    Backward: ``dV = M^T dW_used`` (an SpMM over ``MT``, its values gathered from ``comp`` in its own
    order) and ``dcomp`` the sums of ``SDDMM(M, dW_used, V)`` over the entries each comp value fills."""

    @staticmethod
    def forward(ctx, comp: Tensor, V: Tensor, basis: dict) -> Tensor:
        flat = comp.reshape(-1)
        ctx.save_for_backward(comp, V)
        ctx.basis = basis
        values = flat.index_select(0, basis["M_values_at"])
        return torch.ops.sparsetir.spmm(basis["M_indptr"], basis["M_indices"], values, V, V.shape[0])

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        comp, V = ctx.saved_tensors
        basis, grad = ctx.basis, grad.contiguous()
        d_comp = d_V = None
        if ctx.needs_input_grad[1]:
            values = comp.reshape(-1).index_select(0, basis["MT_values_at"])
            d_V = torch.ops.sparsetir.spmm(basis["MT_indptr"], basis["MT_indices"], values, grad, grad.shape[0])
        if ctx.needs_input_grad[0]:
            ones = basis.get(("ones", grad.dtype))
            if ones is None:  # kept: the SDDMM then finds its values unchanged
                ones = basis[("ones", grad.dtype)] = torch.ones(basis["M_indices"].shape[0], dtype=grad.dtype,
                                                                device=grad.device)
            products = torch.ops.sparsetir.sddmm(basis["M_indptr"], basis["M_indices"], ones, grad, V)
            d_comp = torch.zeros(comp.numel(), dtype=comp.dtype, device=comp.device).index_add_(
                0, basis["M_values_at"], products.to(comp.dtype)).reshape(comp.shape)
        return d_comp, d_V, None


def _index(x: Tensor, extent: int, name: str) -> Tensor:
    """An index tensor ``x`` (1-D integer, entries in ``[0, extent)``), checked."""
    if x.dtype.is_complex or x.dtype == torch.bool or x.dim() != 1:
        raise TypeError(f"{name} must be float features (nodes, in) or a 1-D index tensor, got {x.dtype} "
                        f"{tuple(x.shape)}")
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= extent):
        raise ValueError(f"{name} holds node indices, which must lie in [0, {extent}) (in_channels)")
    return x


ACTIVATIONS = {"relu": F.relu, "elu": F.elu, "gelu": F.gelu, "leaky_relu": F.leaky_relu, "tanh": torch.tanh}


class RGCN(nn.Module):
    """A stack of :class:`RGCNConv` layers (``in -> hidden -> ... -> out``) with an activation (and
    dropout) between them.

    Parameters
    ----------
    in_channels, hidden_channels, out_channels : int
        Feature sizes; ``in_channels`` is the number of nodes for featureless input (``x=None``).
    num_relations : int
    num_layers : int
        Two by default, as in the R-GCN paper's entity classification.
    dropout : float
        Dropout after each activation (training only).
    act : str or callable
        ``relu`` (default), ``elu``, ``gelu``, ``leaky_relu``, ``tanh``, a callable, or None.
    **conv_kwargs
        Given to every layer: ``num_bases``, ``num_blocks``, ``aggr``, ``root_weight``, ``bias``,
        ``format``, ``target``.

    ``forward(x, edge_index, edge_type=None)`` takes what :class:`RGCNConv` takes; the structure is
    prepared once (:meth:`prepare`) and shared by the layers. ``state_dict`` keys:
    ``convs.<i>.weight``, ...
    """

    def __init__(self, in_channels, hidden_channels: int, out_channels: int, num_relations: int, num_layers: int = 2,
                 dropout: float = 0.0, act="relu", **conv_kwargs):
        super().__init__()
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be a positive int, got {num_layers!r}")
        if isinstance(act, str) and act not in ACTIVATIONS:
            raise ValueError(f"act must be one of {', '.join(ACTIVATIONS)}, a callable or None; got {act!r}")
        self.num_relations, self.num_layers, self.dropout = num_relations, num_layers, float(dropout)
        self.act = ACTIVATIONS[act] if isinstance(act, str) else act
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList(RGCNConv(widths[i], widths[i + 1], num_relations, **conv_kwargs)
                                   for i in range(num_layers))

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()

    def prepare(self, edge_index, edge_type: Tensor | None = None, num_nodes: int | None = None) -> RGCNGraph:
        """The :class:`RGCNGraph` of a structure, converted once (an RGCNGraph is returned as is);
        an ``edge_index`` needs ``num_nodes``."""
        if isinstance(edge_index, RGCNGraph):
            return edge_index
        if isinstance(edge_index, Tensor) and edge_index.layout == torch.strided:
            if num_nodes is None:
                raise ValueError("prepare(edge_index, edge_type) needs num_nodes")
            return _cached_edges(edge_index, edge_type, self.num_relations, (num_nodes, num_nodes))
        return _cached_relational(edge_index)

    def forward(self, x, edge_index, edge_type: Tensor | None = None) -> Tensor:
        if not isinstance(edge_index, RGCNGraph):
            num_nodes = self.convs[0].in_channels_l if x is None else int(x.shape[0])
            edge_index = self.prepare(edge_index, edge_type, num_nodes)
            edge_type = None
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index, edge_type)
            if i < self.num_layers - 1:
                if self.act is not None:
                    x = self.act(x)
                if self.dropout:
                    x = F.dropout(x, p=self.dropout, training=self.training)
        return x

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.convs[0].in_channels}, {self.convs[-1].out_channels}, " \
               f"num_relations={self.num_relations}, num_layers={self.num_layers})"

