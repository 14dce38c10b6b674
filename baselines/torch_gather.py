"""Plain torch gather-and-scatter baselines: R-GCN inference and sparse 3-D convolution, no graph library.

R-GCN (family ``rgcn``): every variant computes what ``sparsetir.reference.rgcn.rgcn_reference``
computes for an ``RGCNInputs`` (a relational structure, features ``X`` and two layers of
PyG-named weights)::

    layer(h) = sum_r mean_{j -> i in relation r} h_j W_r  +  h_i root  +  bias
    Y = layer_2(relu(layer_1(X)))

The structure is read through its interface (``coordinates() -> (relation, row = target,
column = source)``, ``shape``, ``num_relations``): an edge ``j -> i`` of relation ``r`` is the
entry ``A_r[i, j]``. :class:`RelationalEdges`, :func:`layer_weights`, :func:`features` and
:func:`two_layers` are what the PyG and DGL R-GCN baselines (``pyg.py``, ``dgl.py``) build on too.

=============================  ==========================================================
``torch-relation-loop``        per relation, ``index_add_`` of ``h[src] * norm`` into the
                               relation's targets, then ``@ W_r``
``torch-gather-bmm-scatter``   gather ``h[src]`` and ``W[rel]``, ``bmm``, scale,
                               ``index_add_`` into the targets
=============================  ==========================================================

Sparse convolution (family ``conv``): ``torch-gather-mm``, TorchSparse's dataflow in plain
torch: per offset, gather ``X[in]``, ``@ W[k]``, ``index_add_`` into ``Y[out]``; its network
form chains the layers with a ReLU between them. A layer is read through its interface
(``sparsetir.bench.families.conv.ConvLayer``: ``X``, ``W`` and the kernel map ``kmap`` with
``in_idx``, ``out_idx``, ``indptr``, ``num_outputs``). Each ``run`` has ``run.rows = None``
(outputs in the kernel map's row order), ``run.map_s = None`` and ``run.build_map = None``
(it uses the benchmark's map, built by sparsetir).

Max/min aggregation (``aggregate-max`` / ``aggregate-min``: ``sparsetir.reference.aggregate``'s reduce
stage, 0 on an empty row): ``torch-scatter-amax`` / ``torch-scatter-amin``, PyG's ``scatter(reduce="max")``
in plain torch: gather ``B[source]`` per entry, ``scatter_reduce_(reduce="amax", include_self=False)``
into zeros; its factory takes ``(A, B, device="cpu")``.

Every other factory takes ``(inputs, device="cpu")``, converts once and returns ``run()`` giving a torch
tensor computed under ``torch.no_grad()``.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from baselines import Variant


def probe() -> tuple[bool, str]:
    """torch is a hard dependency: always there; the reason names its version."""
    return True, f"torch {torch.__version__}"


class RelationalEdges:
    """The structure as torch tensors on ``device``: source, target, relation and mean normalisation of
    every edge (relation-major, as ``coordinates()`` gives them), and each relation's edge range."""

    def __init__(self, inputs, device: str):
        graph = inputs.graph
        relation, row, col = (np.asarray(a, dtype=np.int64) for a in graph.coordinates())
        if np.any(np.diff(relation) < 0):  # keep the relation-major order the slices rely on
            order = np.argsort(relation, kind="stable")
            relation, row, col = relation[order], row[order], col[order]
        self.num_relations, self.num_nodes = int(graph.num_relations), int(graph.shape[0])
        self.src = torch.from_numpy(col).to(device)
        self.dst = torch.from_numpy(row).to(device)
        self.relation = torch.from_numpy(relation).to(device)
        # 1 / |N_r(i)|: edges into the same (relation, target) share the count
        key = self.relation * self.num_nodes + self.dst
        degree = torch.bincount(key, minlength=self.num_relations * self.num_nodes)
        self.norm = (1.0 / degree[key].to(torch.float32)) if key.numel() else torch.zeros(0, device=device)
        bounds = np.searchsorted(relation, np.arange(self.num_relations + 1))
        self.ranges = [(r, int(bounds[r]), int(bounds[r + 1])) for r in range(self.num_relations)
                       if bounds[r + 1] > bounds[r]]


def features(inputs, device: str):
    """The model's input features ``X`` as a float32 tensor on ``device``."""
    return torch.from_numpy(np.ascontiguousarray(inputs.X, dtype=np.float32)).to(device)


def layer_weights(inputs, device: str) -> list[tuple]:
    """Each layer's ``(weight (R, in, out), root (in, out), bias (out,))`` as tensors on ``device``."""
    return [tuple(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(device)
                  for a in (layer.weight, layer.root, layer.bias)) for layer in inputs.layers]


def two_layers(layers: list, X):
    """``run()``: the layers in turn with a ReLU between them, under ``torch.no_grad()``."""
    def run():
        with torch.no_grad():
            h = X
            for index, layer in enumerate(layers):
                h = layer(h)
                if index < len(layers) - 1:
                    h = torch.relu(h)
            return h

    return run


def relation_loop(inputs, device: str = "cpu"):
    """Relation by relation: the relation's targets (compacted to the distinct ones) sum ``h[src] * norm``
    with ``index_add_``, multiply by ``W_r`` and add into the output."""
    edges = RelationalEdges(inputs, device)
    per_relation = []
    for r, lo, hi in edges.ranges:
        targets, local = torch.unique(edges.dst[lo:hi], return_inverse=True)
        per_relation.append((r, edges.src[lo:hi], local, edges.norm[lo:hi, None], targets))

    def layer(h, weight, root, bias):
        out = torch.addmm(bias, h, root)
        for r, src, local, norm, targets in per_relation:
            summed = torch.zeros(targets.numel(), h.shape[1], dtype=h.dtype, device=h.device)
            summed.index_add_(0, local, h[src] * norm)
            out.index_add_(0, targets, summed @ weight[r])
        return out

    return two_layers([lambda h, w=w: layer(h, *w) for w in layer_weights(inputs, device)], features(inputs, device))


def gather_bmm_scatter(inputs, device: str = "cpu"):
    """All edges at once: ``bmm(h[src], W[rel]) * norm``, ``index_add_`` into the targets."""
    edges = RelationalEdges(inputs, device)
    norm = edges.norm[:, None]

    def layer(h, weight, root, bias):
        out = torch.addmm(bias, h, root)
        if edges.src.numel():
            messages = torch.bmm(h[edges.src].unsqueeze(1), weight[edges.relation]).squeeze(1)
            out.index_add_(0, edges.dst, messages.mul_(norm))
        return out

    return two_layers([lambda h, w=w: layer(h, *w) for w in layer_weights(inputs, device)], features(inputs, device))


def gather_mm(layer, device: str = "cpu", threads: int | None = None):
    """One convolution layer: per offset ``Y.index_add_(0, out, X[in] @ W[k])`` (offsets without pairs
    skipped); ``run(features)`` takes other input features (the network's)."""
    kmap = layer.kmap
    X = torch.from_numpy(np.ascontiguousarray(layer.X, dtype=np.float32)).to(device)
    W = torch.from_numpy(np.ascontiguousarray(layer.W, dtype=np.float32)).to(device)
    in_idx = torch.from_numpy(np.asarray(kmap.in_idx, dtype=np.int64)).to(device)
    out_idx = torch.from_numpy(np.asarray(kmap.out_idx, dtype=np.int64)).to(device)
    bounds = np.asarray(kmap.indptr, dtype=np.int64).tolist()
    slices = [(k, in_idx[lo:hi], out_idx[lo:hi]) for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])) if hi > lo]
    shape = (int(kmap.num_outputs), int(W.shape[2]))

    def run(features=None):
        h = X if features is None else features
        with torch.no_grad():
            out = torch.zeros(shape, dtype=h.dtype, device=h.device)
            for k, source, target in slices:
                out.index_add_(0, target, h.index_select(0, source) @ W[k])
            return out

    run.rows, run.map_s, run.build_map = None, None, None
    return run


def gather_mm_network(network, device: str = "cpu", threads: int | None = None):
    """The network (``coords``, ``X``, ``layers``) as gather-mm-scatter layers on the benchmark's kernel maps,
    ReLU between them."""
    runs = [gather_mm(layer, device) for layer in network.layers]
    X = torch.from_numpy(np.ascontiguousarray(network.X, dtype=np.float32)).to(device)

    def run():
        h = X
        for index, layer_run in enumerate(runs):
            h = layer_run(h)
            if index + 1 < len(runs):
                h = torch.relu_(h)
        return h

    run.rows, run.map_s, run.build_map = None, None, None
    return run


def scatter_extreme(A, B: np.ndarray, *, reduce: str, device: str = "cpu"):
    """Each row of ``A`` (scipy CSR: row = target, column = source) the ``reduce`` (``"amax"``/``"amin"``) of
    ``B``'s rows at its entries, 0 where it has none."""
    indptr, indices = np.asarray(A.indptr), np.asarray(A.indices)
    B = np.ascontiguousarray(B, dtype=np.float32)
    if B.ndim != 2 or B.shape[0] != A.shape[1]:
        raise ValueError(f"B must have shape ({A.shape[1]}, feat), got {B.shape}")
    rows = torch.from_numpy(np.repeat(np.arange(A.shape[0], dtype=np.int64), np.diff(indptr))).to(device)
    sources = torch.from_numpy(indices.astype(np.int64)).to(device)
    B_t = torch.from_numpy(B).to(device)
    index = rows[:, None].expand(-1, B.shape[1])
    shape = (A.shape[0], B.shape[1])

    def run():
        with torch.no_grad():
            return B_t.new_zeros(shape).scatter_reduce_(0, index, B_t[sources], reduce=reduce, include_self=False)

    return run


# every variant runs on the CPU and on a GPU
VARIANTS = {
    "rgcn": {"torch-relation-loop": Variant(relation_loop, library_reference=True),
             "torch-gather-bmm-scatter": Variant(gather_bmm_scatter, library_reference=True)},
    "conv": {"torch-gather-mm": Variant(gather_mm, library_reference=True)},
    "conv-network": {"torch-gather-mm": Variant(gather_mm_network)},
    "aggregate-max": {"torch-scatter-amax": Variant(functools.partial(scatter_extreme, reduce="amax"),
                                                    library_reference=True)},
    "aggregate-min": {"torch-scatter-amin": Variant(functools.partial(scatter_extreme, reduce="amin"),
                                                    library_reference=True)},
}
