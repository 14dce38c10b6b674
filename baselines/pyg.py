"""PyG (``torch_geometric``): SpMM, GraphSAGE training and R-GCN inference, in the library's own operators.

PyG is probed once (:func:`probe`, on first use: its import takes seconds), so a process that runs
none of its variants never imports it.

SpMM (op ``spmm``), ``A @ B``:

- ``pyg-edgeindex``: ``EdgeIndex(edge_index, sparse_size, sort_order="row").matmul(B,
  input_value=A.data)``, the sparse-aware tensor PyG's layers use;
- ``pyg-spmm``: ``torch_geometric.utils.spmm(A_csr, B, reduce="sum")`` on a torch CSR tensor.

PyG has no SDDMM operator.

GraphSAGE (family ``sage``): ``SAGEConv`` (mean) layers, relu and dropout between them. Without
pyg-lib or torch-sparse (no wheels here), PyG's CPU paths for ``SAGEConv`` are the structure it
is given, each a contender: ``pyg-csr`` (a torch sparse CSR ``adj_t``: ``torch.sparse.mm(adj_t, x,
reduce="mean")``), ``pyg-edge_index`` (a plain ``(2, E)`` edge list: gather, then ``scatter``
mean) and ``pyg-EdgeIndex`` (``EdgeIndex`` sorted by target: its sparse-aware matmul).
Mini-batches are bipartite layers (``conv((x, x[:targets]), edge_index, size)``) over sampled
blocks given as ``(indptr, indices, num_sources, num_targets)`` numpy arrays; the model's
state_dict keys are PyG ``GraphSAGE``'s (``convs.<i>.lin_l.weight``, ...), so every contender
starts from the same weights. A variant's factory returns the contender object the training
benchmark drives (``model``, ``full_graph``, ``blocks``, ``forward``).

R-GCN (family ``rgcn``): ``pyg-rgcnconv`` (``RGCNConv(aggr="mean")``: per relation, aggregate then
transform) and ``pyg-fastrgcnconv`` (``FastRGCNConv(aggr="mean")``: per edge ``x_j W_r``, a batched
matmul over gathered weights, then a mean), two layers with the inputs' weights copied in
(see :mod:`baselines.torch_gather` for the model).

R-GCN entity-classification training (family ``rgcn-train``, ``sparsetir.bench.families.rgcn``):
PyG's ``examples/rgcn.py`` model, a featureless first layer (``conv(None, ...)``, ``in_channels`` =
the nodes) and a second, both with basis decomposition and mean aggregation, in ``RGCNConv``
(``pyg-rgcnconv``) or ``FastRGCNConv`` (``pyg-fastrgcnconv``); weights in ``sparsetir.nn.RGCN``'s
keys (``convs.<i>.weight``, ``comp``, ``root``, ``bias``: PyG's names). A variant's factory returns
the contender ``sparsetir.bench.training`` drives (``model``, ``structure``, ``forward``).

GAT training (family ``gat``, ``sparsetir.bench.gat``, ``pyg-gatconv``): the GAT paper's model in
PyG ``GATConv`` layers (dropout, ``GATConv(in, hidden, heads)``, ELU, dropout, ``GATConv(hidden *
heads, classes, heads=1, concat=False)``, attention dropout in both) on the ``(2, E)`` edge list,
from the shared state_dict (``convs.<i>.lin.weight``, ``att_src``, ``att_dst``, ``bias``); on the CPU
(the training benchmark) and on a GPU (the bundle's ``gat`` part: ``PygGATTraining(device="cuda")``
puts the model and the edge list there).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import warnings

import numpy as np
import torch

from baselines import Variant
from baselines.scipy_sparse import canonical_csr
from baselines.torch_gather import RelationalEdges, features, layer_weights, two_layers
from baselines.torch_sparse import check_device, csr_tensor, dense_tensor

STRUCTURES = ("csr", "edge_index", "EdgeIndex")


@functools.cache
def probe() -> tuple[bool, str]:
    """Whether PyG imports here (tried once per process), and its version or why not."""
    try:
        pyg = importlib.import_module("torch_geometric")
        importlib.import_module("torch_geometric.nn")
    except Exception as error:  # an ImportError, or a failure inside PyG's import under this torch
        return False, f"torch_geometric is not importable ({error}); install the bench extra"
    return True, f"torch_geometric {pyg.__version__} on torch {torch.__version__}"


def _pyg():
    ok, reason = probe()
    if not ok:
        raise RuntimeError(reason)
    return importlib.import_module("torch_geometric")


@contextlib.contextmanager
def _quiet():
    """Without torch's beta warnings for sparse CSR tensors."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
        yield


# ---------------------------------------------------------------- SpMM


def spmm_edge_index(A, B: np.ndarray, *, device: str = "cpu"):
    """``EdgeIndex.matmul(B, input_value=A.data)`` with a row-sorted edge index."""
    EdgeIndex = _pyg().EdgeIndex
    A = canonical_csr(A, B.dtype)
    m, n = A.shape
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(A.indptr))
    index = torch.from_numpy(np.stack([rows, A.indices.astype(np.int64)]))
    values = torch.from_numpy(A.data)
    if device != "cpu":
        index, values = index.to(check_device(device)), values.to(device)
    edge_index = EdgeIndex(index, sparse_size=(m, n), sort_order="row")
    B_t = dense_tensor(B, n, device)

    def run():
        with _quiet():
            return edge_index.matmul(B_t, input_value=values)

    return run


def spmm_utils(A, B: np.ndarray, *, device: str = "cpu"):
    """``torch_geometric.utils.spmm(A_csr, B, reduce="sum")``."""
    spmm = importlib.import_module(_pyg().__name__ + ".utils").spmm
    A_t = csr_tensor(A, B.dtype, device=device)
    B_t = dense_tensor(B, A_t.shape[1], device)
    return lambda: spmm(A_t, B_t, reduce="sum")


# ---------------------------------------------------------------- GraphSAGE training


class PygGraphSAGE(torch.nn.Module):
    """``num_layers`` PyG ``SAGEConv`` (mean), relu and dropout between them."""

    def __init__(self, in_channels: int, hidden: int, num_layers: int, out_channels: int, dropout: float):
        super().__init__()
        SAGEConv = importlib.import_module(_pyg().__name__ + ".nn").SAGEConv
        widths = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.convs = torch.nn.ModuleList(SAGEConv(widths[i], widths[i + 1], aggr="mean") for i in range(num_layers))
        self.dropout = dropout

    def forward(self, x, structure):
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            if isinstance(structure, list):  # blocks: (edge structure, (sources, targets))
                edges, (sources, targets) = structure[i]
                x = conv((x, x[:targets]), edges, size=(sources, targets))
            else:
                x = conv(x, structure)
            if i < last:
                x = torch.nn.functional.dropout(x.relu(), p=self.dropout, training=self.training)
        return x


class PygSage:
    """One PyG contender: its model and its structure (``csr``, ``edge_index`` or ``EdgeIndex``)."""

    def __init__(self, structure: str):
        if structure not in STRUCTURES:
            raise ValueError(f"unknown PyG structure {structure!r}; expected one of {STRUCTURES}")
        self.structure = structure
        self.name = f"pyg-{structure}"

    def model(self, in_channels: int, hidden: int, num_layers: int, out_channels: int, dropout: float, state: dict):
        """The model with ``state`` (PyG GraphSAGE's state_dict keys) loaded."""
        model = PygGraphSAGE(in_channels, hidden, num_layers, out_channels, dropout)
        model.load_state_dict(state)
        return model

    def _structure(self, indptr: np.ndarray, indices: np.ndarray, sources: int, targets: int):
        indptr = torch.from_numpy(np.asarray(indptr, dtype=np.int64))
        indices = torch.from_numpy(np.asarray(indices, dtype=np.int64))
        if self.structure == "csr":
            with _quiet():
                return torch.sparse_csr_tensor(indptr, indices, torch.ones(indices.shape[0]), size=(targets, sources))
        rows = torch.repeat_interleave(torch.arange(targets, dtype=torch.int64), indptr[1:] - indptr[:-1])
        edge_index = torch.stack([indices, rows])
        if self.structure == "EdgeIndex":
            return _pyg().EdgeIndex(edge_index, sparse_size=(sources, targets), sort_order="col")
        return edge_index

    def full_graph(self, adj_t) -> object:
        """The structure of the whole graph (``adj_t``: scipy CSR, row = target)."""
        return self._structure(adj_t.indptr, adj_t.indices, adj_t.shape[1], adj_t.shape[0])

    def blocks(self, blocks: list) -> list:
        """Sampled blocks ``(indptr, indices, sources, targets)``, input layer first."""
        return [(self._structure(indptr, indices, sources, targets), (sources, targets))
                for indptr, indices, sources, targets in blocks]

    def forward(self, model, x, structure):
        with _quiet():
            return model(x, structure)


# ---------------------------------------------------------------- R-GCN inference


def _rgcn(class_name: str, inputs, device: str):
    cls = getattr(importlib.import_module(_pyg().__name__ + ".nn"), class_name)
    edges = RelationalEdges(inputs, device)
    edge_index = torch.stack([edges.src, edges.dst])
    modules = []
    for weight, root, bias in layer_weights(inputs, device):
        conv = cls(weight.shape[1], weight.shape[2], edges.num_relations, aggr="mean", root_weight=True, bias=True)
        conv = conv.to(device).eval()
        with torch.no_grad():
            conv.weight.copy_(weight)
            conv.root.copy_(root)
            conv.bias.copy_(bias)
        modules.append(conv)
    return two_layers([lambda h, conv=conv: conv(h, edge_index, edges.relation) for conv in modules],
                      features(inputs, device))


def rgcnconv(inputs, device: str = "cpu"):
    """PyG ``RGCNConv(aggr="mean", root_weight=True, bias=True)``, two layers, weights copied in."""
    return _rgcn("RGCNConv", inputs, device)


def fastrgcnconv(inputs, device: str = "cpu"):
    """PyG ``FastRGCNConv(aggr="mean", root_weight=True, bias=True)``, two layers, weights copied in."""
    return _rgcn("FastRGCNConv", inputs, device)


# ---------------------------------------------------------------- R-GCN entity-classification training


class _TwoLayers(torch.nn.Module):
    def __init__(self, convs):
        super().__init__()
        self.convs = torch.nn.ModuleList(convs)


class PygRGCNTraining:
    """PyG ``RGCNConv`` or ``FastRGCNConv`` (``cls_name``) in the entity-classification model."""

    def __init__(self, cls_name: str):
        self.cls_name, self.name = cls_name, "pyg-" + cls_name.lower()

    def available(self) -> tuple[bool, str]:
        return probe()

    def model(self, dims: dict, state: dict):
        cls = getattr(importlib.import_module("torch_geometric.nn"), self.cls_name)
        model = _TwoLayers([cls(dims["nodes"], dims["hidden"], dims["relations"], num_bases=dims["bases"]),
                            cls(dims["hidden"], dims["classes"], dims["relations"], num_bases=dims["bases"])])
        model.load_state_dict(state)
        return model

    def structure(self, task):
        return task.graph["edge_index"], task.graph["edge_type"]

    def forward(self, model, structure, x):
        edge_index, edge_type = structure
        h = torch.relu(model.convs[0](None, edge_index, edge_type))
        return model.convs[1](h, edge_index, edge_type)


# ---------------------------------------------------------------- GAT training


def gat_two_layers(conv, dims: dict):
    """The GAT model's two layers in ``convs`` (``conv``: a class with PyG ``GATConv``'s arguments)."""
    return _TwoLayers([conv(dims["in"], dims["hidden"], heads=dims["heads"], dropout=dims["dropout"]),
                       conv(dims["hidden"] * dims["heads"], dims["classes"], heads=1, concat=False,
                            dropout=dims["dropout"])])


def gat_forward(model, structure, x, dropout: float, drop=torch.nn.functional.dropout):
    """Dropout, layer 1, ELU, dropout, layer 2 (``sparsetir.bench.gat``'s model); ``drop(x, p, training)``: the
    dropout function (torch's; sparsetir's contender passes ``sparsetir.nn.dropout``, the same distribution)."""
    h = drop(x, p=dropout, training=model.training)
    h = torch.nn.functional.elu(model.convs[0](h, structure))
    h = drop(h, p=dropout, training=model.training)
    return model.convs[1](h, structure)


class PygGATTraining:
    """PyG ``GATConv`` in the GAT model, on the edge list."""

    name = "pyg-gatconv"

    def __init__(self, device: str = "cpu"):
        self.device = device

    def available(self) -> tuple[bool, str]:
        return probe()

    def model(self, dims: dict, state: dict):
        model = gat_two_layers(importlib.import_module(_pyg().__name__ + ".nn").GATConv, dims)
        model.load_state_dict(state)
        self.dropout = dims["dropout"]
        return model.to(self.device)

    def structure(self, task):
        return task.graph["edge_index"].to(self.device)

    def forward(self, model, structure, x):
        return gat_forward(model, structure, x, self.dropout)


VARIANTS = {
    "spmm": {"pyg-edgeindex": Variant(spmm_edge_index, library_reference=True),
             "pyg-spmm": Variant(spmm_utils, library_reference=True)},
    "sage": {f"pyg-{structure}": Variant(lambda s=structure: PygSage(s), devices=("cpu",), library_reference=True)
             for structure in STRUCTURES},
    "rgcn": {"pyg-rgcnconv": Variant(rgcnconv, library_reference=True),
             "pyg-fastrgcnconv": Variant(fastrgcnconv, library_reference=True)},
    "rgcn-train": {"pyg-rgcnconv": Variant(lambda: PygRGCNTraining("RGCNConv"), devices=("cpu",),
                                           library_reference=True),
                   "pyg-fastrgcnconv": Variant(lambda: PygRGCNTraining("FastRGCNConv"), devices=("cpu",),
                                               library_reference=True)},
    "gat": {"pyg-gatconv": Variant(PygGATTraining, devices=("cpu", "cuda"), library_reference=True)},
}
