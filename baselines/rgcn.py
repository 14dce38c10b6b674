"""R-GCN inference baselines: the same two-layer model, the same weights, in each library.

Every variant computes what ``sparsetir.reference.rgcn.rgcn_reference`` computes for an
``RGCNInputs`` (a relational structure, features ``X`` and two layers of PyG-named weights)::

    layer(h) = sum_r mean_{j -> i in relation r} h_j W_r  +  h_i root  +  bias
    Y = layer_2(relu(layer_1(X)))

The structure is read through its interface (``coordinates() -> (relation, row = target,
column = source)``, ``shape``, ``num_relations``): an edge ``j -> i`` of relation ``r`` is the
entry ``A_r[i, j]``. A factory ``factory(inputs, device="cpu")`` converts the inputs once (edge
tensors, per-relation slices, library modules with the weights copied in) and returns a
zero-argument ``run()`` giving the ``(n, out)`` output as a torch tensor, computed under
``torch.no_grad()``.

=============================  ==========================================================
``pyg-rgcnconv``               PyG ``RGCNConv(aggr="mean")``: per relation, aggregate then
                               transform
``pyg-fastrgcnconv``           PyG ``FastRGCNConv(aggr="mean")``: per edge ``x_j W_r`` (a
                               batched matmul over gathered weights), then a mean
``dgl-relgraphconv``           DGL ``RelGraphConv`` (no regulariser, self-loop = root), edges
                               sorted by type (``presorted``: ``segment_mm``), the mean as
                               the per-edge ``norm`` it takes
``torch-relation-loop``        plain torch: per relation, ``index_add_`` of ``h[src] * norm``
                               into the relation's targets, then ``@ W_r``
``torch-gather-bmm-scatter``   plain torch: gather ``h[src]`` and ``W[rel]``, ``bmm``, scale,
                               ``index_add_`` into the targets
``graphiler``                  unavailable: no installable release (see :data:`GRAPHILER_REASON`)
=============================  ==========================================================

``available(op, device, variant=None)`` says whether a variant (or, without one, the module)
can run, and why not. DGL is imported through :mod:`baselines.dgl_import`.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np

from baselines.dgl_import import import_dgl

try:
    import torch
except ImportError:  # pragma: no cover - torch is a project dependency
    torch = None

OP = "rgcn"
GRAPHILER_REASON = ("Graphiler (xiezhq-hermann/graphiler) has no installable release: no wheel on PyPI; it builds "
                    "from source as a C++/CUDA extension against DGL 0.9 and PyTorch 1.x, neither of which "
                    "installs with Python 3.11 and torch 2.13")


@functools.cache
def import_pyg():
    """``(torch_geometric.nn, None)``, or ``(None, reason)``; imported on first use (seconds), so a
    process that runs only the torch or DGL variants (a memory probe) does not pay for it."""
    try:
        nn = importlib.import_module("torch_geometric.nn")
    except Exception as error:  # an ImportError, or a failure inside PyG's import under this torch
        return None, f"torch_geometric is not importable ({error}); install the bench extra"
    return nn, None


def _check_op(op: str) -> None:
    if op != OP:
        raise ValueError(f"unknown op {op!r}; this module offers {OP!r} only")


def _device_reason(device: str) -> str | None:
    """Why ``device`` cannot be used by torch here, or None."""
    if device == "cpu":
        return None
    if not str(device).startswith("cuda"):
        return f"unknown device {device!r}; expected 'cpu' or 'cuda'"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA GPU (device {device!r})"
    return None


def available(op: str = OP, device: str = "cpu", variant: str | None = None) -> tuple[bool, str]:
    """Whether ``variant`` (every variant when None: the module) can run ``op`` on ``device``, and why not."""
    _check_op(op)
    if variant is not None and variant not in RGCN_VARIANTS:
        raise ValueError(f"unknown R-GCN baseline {variant!r}; known: {', '.join(RGCN_VARIANTS)}")
    if variant == "graphiler":
        return False, GRAPHILER_REASON
    if torch is None:
        return False, "torch is not importable"
    reason = _device_reason(device)
    if reason:
        return False, reason
    if variant is not None and variant.startswith("pyg-"):
        nn, why = import_pyg()
        if nn is None:
            return False, why
        version = importlib.import_module("torch_geometric").__version__
        return True, f"torch_geometric {version} on torch {torch.__version__}"
    if variant == "dgl-relgraphconv":
        dgl, why = import_dgl()
        if dgl is None:
            return False, why
        if device != "cpu":
            return False, f"dgl {dgl.__version__} from PyPI is built for the CPU only"
        try:
            from dgl.nn.pytorch import RelGraphConv  # noqa: F401, PLC0415 - optional library, imported on demand
        except Exception as error:  # DGL's nn package can fail to import on its own under a newer torch
            return False, f"dgl {dgl.__version__}: dgl.nn.pytorch.RelGraphConv does not import: {error}"
        return True, f"dgl {dgl.__version__} RelGraphConv on torch {torch.__version__}"
    return True, f"torch {torch.__version__}"


def _require(variant: str, device: str) -> None:
    ok, reason = available(OP, device, variant)
    if not ok:
        raise RuntimeError(reason)


class _Edges:
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


def _features(inputs, device: str):
    return torch.from_numpy(np.ascontiguousarray(inputs.X, dtype=np.float32)).to(device)


def _weights(inputs, device: str) -> list[tuple]:
    """Each layer's ``(weight (R, in, out), root (in, out), bias (out,))`` as tensors on ``device``."""
    return [tuple(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(device)
                  for a in (layer.weight, layer.root, layer.bias)) for layer in inputs.layers]


def _stack(layers: list, X):
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


def _pyg(cls, inputs, device: str):
    edges = _Edges(inputs, device)
    edge_index = torch.stack([edges.src, edges.dst])
    modules = []
    for weight, root, bias in _weights(inputs, device):
        conv = cls(weight.shape[1], weight.shape[2], edges.num_relations, aggr="mean", root_weight=True, bias=True)
        conv = conv.to(device).eval()
        with torch.no_grad():
            conv.weight.copy_(weight)
            conv.root.copy_(root)
            conv.bias.copy_(bias)
        modules.append(conv)
    return _stack([lambda h, conv=conv: conv(h, edge_index, edges.relation) for conv in modules],
                  _features(inputs, device))


def pyg_rgcnconv(inputs, device: str = "cpu"):
    """PyG ``RGCNConv(aggr="mean", root_weight=True, bias=True)``, two layers, weights copied in."""
    _require("pyg-rgcnconv", device)
    return _pyg(import_pyg()[0].RGCNConv, inputs, device)


def pyg_fastrgcnconv(inputs, device: str = "cpu"):
    """PyG ``FastRGCNConv(aggr="mean", root_weight=True, bias=True)``, two layers, weights copied in."""
    _require("pyg-fastrgcnconv", device)
    return _pyg(import_pyg()[0].FastRGCNConv, inputs, device)


def dgl_relgraphconv(inputs, device: str = "cpu"):
    """DGL ``RelGraphConv(regularizer=None, self_loop=True, bias=True)``: ``linear_r.W`` = weight,
    ``loop_weight`` = root, ``h_bias`` = bias; the mean is the per-edge ``norm``; edges sorted by type."""
    _require("dgl-relgraphconv", device)
    dgl, _ = import_dgl()
    from dgl.nn.pytorch import RelGraphConv  # noqa: PLC0415 - optional library, imported through the shim

    edges = _Edges(inputs, device)
    graph = dgl.graph((edges.src, edges.dst), num_nodes=edges.num_nodes)
    norm = edges.norm[:, None]
    modules = []
    for weight, root, bias in _weights(inputs, device):
        conv = RelGraphConv(weight.shape[1], weight.shape[2], edges.num_relations, regularizer=None, bias=True,
                            activation=None, self_loop=True).to(device).eval()
        with torch.no_grad():
            conv.linear_r.W.copy_(weight)
            conv.loop_weight.copy_(root)
            conv.h_bias.copy_(bias)
        modules.append(conv)
    return _stack([lambda h, conv=conv: conv(graph, h, edges.relation, norm, presorted=True) for conv in modules],
                  _features(inputs, device))


def torch_relation_loop(inputs, device: str = "cpu"):
    """Plain torch, relation by relation: the relation's targets (compacted to the distinct ones) sum
    ``h[src] * norm`` with ``index_add_``, multiply by ``W_r`` and add into the output."""
    _require("torch-relation-loop", device)
    edges = _Edges(inputs, device)
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

    return _stack([lambda h, w=w: layer(h, *w) for w in _weights(inputs, device)], _features(inputs, device))


def torch_gather_bmm_scatter(inputs, device: str = "cpu"):
    """Plain torch, all edges at once: ``bmm(h[src], W[rel]) * norm``, ``index_add_`` into the targets."""
    _require("torch-gather-bmm-scatter", device)
    edges = _Edges(inputs, device)
    norm = edges.norm[:, None]

    def layer(h, weight, root, bias):
        out = torch.addmm(bias, h, root)
        if edges.src.numel():
            messages = torch.bmm(h[edges.src].unsqueeze(1), weight[edges.relation]).squeeze(1)
            out.index_add_(0, edges.dst, messages.mul_(norm))
        return out

    return _stack([lambda h, w=w: layer(h, *w) for w in _weights(inputs, device)], _features(inputs, device))


def graphiler(inputs, device: str = "cpu"):
    """Graphiler cannot be installed here; this raises with the reason (see :func:`available`)."""
    raise RuntimeError(GRAPHILER_REASON)


RGCN_VARIANTS = {
    "pyg-rgcnconv": pyg_rgcnconv,
    "pyg-fastrgcnconv": pyg_fastrgcnconv,
    "dgl-relgraphconv": dgl_relgraphconv,
    "torch-relation-loop": torch_relation_loop,
    "torch-gather-bmm-scatter": torch_gather_bmm_scatter,
    "graphiler": graphiler,
}

# What the benchmark reads: op -> variant name -> factory(inputs, device="cpu") -> run.
VARIANTS = {OP: RGCN_VARIANTS}
