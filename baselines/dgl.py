"""DGL (2.1, CPU only): SpMM and SDDMM (``dgl.ops``), GraphSAGE training and R-GCN inference (``dgl.nn``).

PyPI's last DGL for Python 3.11 is 2.1.0 (CPU only), built for torch <= 2.2. Importing it
under torch 2.13 fails in two places these baselines never use, so :func:`import_dgl` (the
library's one probe, tried once per process) shims them:

1. ``dgl.graphbolt`` (imported by ``dgl.distributed``) needs ``torchdata.datapipes``, which
   torchdata >= 0.10 removed, and a graphbolt library built for this torch. The shim installs
   a stand-in ``dgl.graphbolt`` module before ``import dgl``. It defines the one class DGL's
   own code checks with ``isinstance`` (``FusedCSCSamplingGraph``, never instantiated); any
   other attribute raises ``AttributeError`` naming this shim.
2. ``dgl.utils`` falls back to ``setuptools.extern.packaging`` when ``packaging`` is missing;
   newer setuptools dropped ``setuptools.extern``. The shim aliases it to ``packaging`` when
   that is importable.

SpMM (``dgl-gspmm``) sends ``B[j] * A[i, j]`` along each edge ``j -> i`` of a bipartite graph
built once from A's non-zeros and sums at ``i`` (``gspmm(g, "mul", "sum")``). SDDMM
(``dgl-gsddmm``) takes the dot product ``X[i] . Y[j]`` on each edge ``i -> j`` (``gsddmm(g,
"dot")``) and then multiplies by ``A.data``, timed together, as the contract's op is.

GraphSAGE (``dgl``): ``dgl.nn.SAGEConv`` (mean) layers on a ``dgl.graph`` (edges source ->
target) or ``dgl.create_block`` message-flow graphs; DGL's layer projects before aggregating
when its input is wider than its output, as sparsetir's does. Weights come in PyG
``GraphSAGE``'s state_dict keys and are mapped: ``fc_neigh.weight = lin_l.weight``,
``fc_self.weight = lin_r.weight``, ``fc_self.bias = lin_l.bias``.

R-GCN (``dgl-relgraphconv``): ``RelGraphConv`` (no regulariser, self-loop = root), edges sorted
by type (``presorted``: ``segment_mm``), the mean as the per-edge ``norm`` it takes (see
:mod:`baselines.torch_gather` for the model).

R-GCN entity-classification training (family ``rgcn-train``, ``dgl-relgraphconv``): PyG's example
model in DGL. The featureless first layer is DGL's message passing, each edge's message the row
``W_r[source]`` of the combined basis weight times the mean's ``norm``, summed by ``update_all``
(what ``RelGraphConv`` computes for one-hot input, without forming the ``(E, nodes)`` one-hot
matrix), then ``RelGraphConv(regularizer="basis", self_loop=True)``, edges sorted by type; PyG's
keys mapped (``linear_r.W = weight``, ``linear_r.coeff = comp``, ``loop_weight = root``,
``h_bias = bias``).

GAT training (family ``gat``, ``dgl-gatconv``): the GAT model (``baselines.pyg.gat_forward``) in
DGL ``GATConv`` layers (``attn_drop`` the attention dropout; the heads flattened, or averaged for
the last layer), the graph with PyG's self-loops (``remove_self_loop``, then ``add_self_loop``);
PyG's keys mapped (``fc.weight = lin.weight``, ``attn_l = att_src``, ``attn_r = att_dst``).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable

import numpy as np
import torch

from baselines import Variant, optional_library
from baselines.scipy_sparse import canonical_csr
from baselines.torch_gather import RelationalEdges, features, layer_weights, two_layers


class _MissingGraphbolt(types.ModuleType):
    """Stand-in for ``dgl.graphbolt``: the isinstance target, and a clear error for anything else."""

    class FusedCSCSamplingGraph:  # DGL only tests isinstance against it
        pass

    def __getattr__(self, name: str):
        raise AttributeError(
            f"dgl.graphbolt.{name} is unavailable: graphbolt does not load under this torch, and "
            "baselines.dgl replaced it with a stand-in (SpMM/SDDMM do not need it)"
        )


def _shim_setuptools_extern() -> None:
    try:
        importlib.import_module("setuptools.extern.packaging")
        return
    except ImportError:
        pass
    try:
        packaging = importlib.import_module("packaging")
        importlib.import_module("packaging.version")
    except ImportError:
        return  # DGL will then fail with its own message, which import_dgl reports
    extern = types.ModuleType("setuptools.extern")
    extern.packaging = packaging
    sys.modules.setdefault("setuptools.extern", extern)
    sys.modules.setdefault("setuptools.extern.packaging", packaging)


@functools.cache
def import_dgl():
    """``(dgl, None)`` when DGL imports (shimmed as needed), else ``(None, reason)``; tried once per process."""
    if importlib.util.find_spec("dgl") is None:
        return None, "dgl is not installed (pip install '.[dgl]': dgl 2.1.0, CPU only)"
    sys.modules.setdefault("dgl.graphbolt", _MissingGraphbolt("dgl.graphbolt"))
    _shim_setuptools_extern()
    try:
        dgl = importlib.import_module("dgl")
        importlib.import_module("dgl.ops")
    except Exception as error:  # DGL's import can fail in many ways under a newer torch
        return None, f"dgl does not import under this torch even with the shim: {type(error).__name__}: {error}"
    return dgl, None


#: ``probe()``: whether DGL imports here (through the shim), and its version or why not; ``_dgl()``: the module
#: (``import_dgl`` looked up at each call, so a test can replace it).
probe, _dgl = optional_library(lambda: import_dgl(), lambda dgl: f"dgl {dgl.__version__} on torch {torch.__version__}")


def _nn_layer_check(layer: str) -> Callable[[str], tuple[bool, str]]:
    """A variant's check: on the CPU only (``_cpu_only``), and ``dgl.nn.pytorch.<layer>`` imports (DGL's nn
    package can fail to import on its own under a newer torch); the reason names DGL's version."""

    def check(device: str) -> tuple[bool, str]:
        ok, reason = _cpu_only(device)
        if not ok:
            return ok, reason
        try:
            getattr(importlib.import_module("dgl.nn.pytorch"), layer)
        except Exception as error:  # an ImportError, an AttributeError, or a failure inside DGL's import
            return False, f"dgl {import_dgl()[0].__version__}: dgl.nn.pytorch.{layer} does not import: {error}"
        return True, f"dgl {import_dgl()[0].__version__} {layer} on torch {torch.__version__}"

    return check


def _cpu_only(device: str) -> tuple[bool, str]:
    if device != "cpu":
        return False, f"dgl {import_dgl()[0].__version__} from PyPI is built for the CPU only"
    return True, ""


# ---------------------------------------------------------------- SpMM and SDDMM


def _graph(A, source_rows: bool):
    """A's non-zeros as a bipartite graph: ``row -> column`` edges, or ``column -> row``."""
    dgl = _dgl()
    m, n = A.shape
    rows = torch.from_numpy(np.repeat(np.arange(m, dtype=np.int64), np.diff(A.indptr)))
    cols = torch.from_numpy(A.indices.astype(np.int64))
    if source_rows:
        return dgl.heterograph({("row", "nz", "col"): (rows, cols)}, num_nodes_dict={"row": m, "col": n})
    return dgl.heterograph({("col", "nz", "row"): (cols, rows)}, num_nodes_dict={"col": n, "row": m})


def spmm_gspmm(A, B: np.ndarray):
    """``A @ B`` as ``gspmm(g, "mul", "sum", B, A.data)`` on ``column -> row`` edges."""
    A = canonical_csr(A, B.dtype)
    if B.ndim != 2 or B.shape[0] != A.shape[1]:
        raise ValueError(f"B must have shape ({A.shape[1]}, feat), got {B.shape}")
    dgl = _dgl()
    graph = _graph(A, source_rows=False)
    B_t = torch.from_numpy(np.ascontiguousarray(B))
    weights = torch.from_numpy(A.data)
    return lambda: dgl.ops.gspmm(graph, "mul", "sum", B_t, weights)


def sddmm_gsddmm(A, X: np.ndarray, Y: np.ndarray):
    """``A.data * (X[i] . Y[j])`` as ``gsddmm(g, "dot", X, Y)`` then ``* A.data``, in A's CSR order."""
    A = canonical_csr(A, X.dtype)
    m, n = A.shape
    if X.ndim != 2 or Y.ndim != 2 or len(X) != m or len(Y) != n or X.shape[1] != Y.shape[1]:
        raise ValueError(f"X must be ({m}, k) and Y ({n}, k) with the same k, got {X.shape} and {Y.shape}")
    dgl = _dgl()
    graph = _graph(A, source_rows=True)
    X_t = torch.from_numpy(np.ascontiguousarray(X))
    Y_t = torch.from_numpy(np.ascontiguousarray(Y))
    values = torch.from_numpy(A.data)
    return lambda: dgl.ops.gsddmm(graph, "dot", X_t, Y_t).view(-1).mul_(values)


# ---------------------------------------------------------------- GraphSAGE training


class DglGraphSAGE(torch.nn.Module):
    """``num_layers`` DGL ``SAGEConv`` (mean), relu and dropout between them."""

    def __init__(self, in_channels: int, hidden: int, num_layers: int, out_channels: int, dropout: float):
        super().__init__()
        dgl = _dgl()
        widths = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.convs = torch.nn.ModuleList(dgl.nn.SAGEConv(widths[i], widths[i + 1], "mean")
                                         for i in range(num_layers))
        self.dropout = dropout

    def forward(self, x, structure):
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            if isinstance(structure, list):
                block = structure[i]
                x = conv(block, (x, x[:block.num_dst_nodes()]))
            else:
                x = conv(structure, x)
            if i < last:
                x = torch.nn.functional.dropout(x.relu(), p=self.dropout, training=self.training)
        return x


def dgl_state(state: dict) -> dict:
    """PyG GraphSAGE state_dict keys -> DGL SAGEConv keys."""
    names = {"lin_l.weight": "fc_neigh.weight", "lin_r.weight": "fc_self.weight", "lin_l.bias": "fc_self.bias"}
    out = {}
    for key, value in state.items():
        prefix, _, name = key.partition(".")  # "convs", "<i>.lin_l.weight"
        layer, _, param = name.partition(".")
        if param not in names:
            raise KeyError(f"no DGL SAGEConv parameter for {key!r}")
        out[f"{prefix}.{layer}.{names[param]}"] = value
    return out


class DglSage:
    """The DGL contender."""

    name = "dgl"

    def model(self, in_channels: int, hidden: int, num_layers: int, out_channels: int, dropout: float, state: dict):
        model = DglGraphSAGE(in_channels, hidden, num_layers, out_channels, dropout)
        model.load_state_dict(dgl_state(state))
        return model

    def full_graph(self, adj_t):
        dgl = _dgl()
        rows = np.repeat(np.arange(adj_t.shape[0], dtype=np.int64), np.diff(adj_t.indptr))
        sources = torch.from_numpy(adj_t.indices.astype(np.int64))
        return dgl.graph((sources, torch.from_numpy(rows)), num_nodes=adj_t.shape[0])

    def blocks(self, blocks: list) -> list:
        dgl = _dgl()
        out = []
        for indptr, indices, sources, targets in blocks:
            rows = np.repeat(np.arange(targets, dtype=np.int64), np.diff(indptr))
            out.append(dgl.create_block((torch.from_numpy(np.asarray(indices, dtype=np.int64)), torch.from_numpy(rows)),
                                        num_src_nodes=sources, num_dst_nodes=targets))
        return out

    def forward(self, model, x, structure):
        return model(x, structure)


# ---------------------------------------------------------------- R-GCN inference


_relgraphconv_check = _nn_layer_check("RelGraphConv")


def relgraphconv(inputs, device: str = "cpu"):
    """DGL ``RelGraphConv(regularizer=None, self_loop=True, bias=True)``: ``linear_r.W`` = weight,
    ``loop_weight`` = root, ``h_bias`` = bias; the mean is the per-edge ``norm``; edges sorted by type."""
    dgl = _dgl()
    from dgl.nn.pytorch import RelGraphConv  # noqa: PLC0415 - optional library, imported through the shim

    edges = RelationalEdges(inputs, device)
    graph = dgl.graph((edges.src, edges.dst), num_nodes=edges.num_nodes)
    norm = edges.norm[:, None]
    modules = []
    for weight, root, bias in layer_weights(inputs, device):
        conv = RelGraphConv(weight.shape[1], weight.shape[2], edges.num_relations, regularizer=None, bias=True,
                            activation=None, self_loop=True).to(device).eval()
        with torch.no_grad():
            conv.linear_r.W.copy_(weight)
            conv.loop_weight.copy_(root)
            conv.h_bias.copy_(bias)
        modules.append(conv)
    return two_layers([lambda h, conv=conv: conv(graph, h, edges.relation, norm, presorted=True) for conv in modules],
                      features(inputs, device))


# ---------------------------------------------------------------- R-GCN entity-classification training


class _TwoLayers(torch.nn.Module):
    def __init__(self, convs):
        super().__init__()
        self.convs = torch.nn.ModuleList(convs)


class _FeaturelessBasisLayer(torch.nn.Module):
    """The featureless basis layer in DGL: messages ``W_r[source] * norm``, summed by ``update_all``."""

    def __init__(self, nodes: int, out: int, relations: int, bases: int):
        super().__init__()
        self.nodes, self.out, self.relations, self.bases = nodes, out, relations, bases
        self.weight = torch.nn.Parameter(torch.empty(bases, nodes, out))
        self.comp = torch.nn.Parameter(torch.empty(relations, bases))
        self.root = torch.nn.Parameter(torch.empty(nodes, out))
        self.bias = torch.nn.Parameter(torch.empty(out))

    def forward(self, graph, etype, norm, src):
        import dgl.function as fn  # noqa: PLC0415 - optional library, through the shim

        weight = (self.comp @ self.weight.reshape(self.bases, -1)).reshape(self.relations * self.nodes, self.out)
        with graph.local_scope():
            graph.edata["m"] = weight.index_select(0, etype * self.nodes + src) * norm
            graph.update_all(fn.copy_e("m", "m"), fn.sum("m", "h"))
            return graph.dstdata["h"] + self.root + self.bias


#: PyG RGCNConv's parameter names -> DGL RelGraphConv's (basis regulariser, self loop, bias)
_RELGRAPHCONV_NAMES = {"weight": "linear_r.W", "comp": "linear_r.coeff", "root": "loop_weight", "bias": "h_bias"}


class DglRGCNTraining:
    """The entity-classification model in DGL (see the module docstring)."""

    name = "dgl-relgraphconv"

    def available(self) -> tuple[bool, str]:
        return _relgraphconv_check("cpu")

    def model(self, dims: dict, state: dict):
        from dgl.nn.pytorch import RelGraphConv  # noqa: PLC0415 - optional library, through the shim

        first = _FeaturelessBasisLayer(dims["nodes"], dims["hidden"], dims["relations"], dims["bases"])
        second = RelGraphConv(dims["hidden"], dims["classes"], dims["relations"], regularizer="basis",
                              num_bases=dims["bases"], self_loop=True, bias=True)
        model = _TwoLayers([first, second])
        model.load_state_dict({self.parameter_name(key): value for key, value in state.items()})
        return model

    @staticmethod
    def parameter_name(key: str) -> str:
        """This model's name of the PyG-keyed parameter ``key`` (``convs.<i>.weight``, ``comp``, ``root``,
        ``bias``): the featureless first layer (ours) keeps PyG's names, the second is DGL's RelGraphConv."""
        _convs, layer, name = key.split(".", 2)
        return f"convs.{layer}.{name if layer == '0' else _RELGRAPHCONV_NAMES[name]}"

    def structure(self, task):
        dgl = _dgl()
        edge_index, edge_type, num_nodes = (task.graph[k] for k in ("edge_index", "edge_type", "num_nodes"))
        order = torch.argsort(edge_type, stable=True)  # presorted by type: RelGraphConv's segment_mm path
        src, dst, etype = edge_index[0][order], edge_index[1][order], edge_type[order]
        graph = dgl.graph((src, dst), num_nodes=num_nodes)
        relations = int(edge_type.max()) + 1 if edge_type.numel() else 1
        key = etype * num_nodes + dst  # the mean over each relation's edges into a node, repeats counted
        degree = torch.bincount(key, minlength=relations * num_nodes)
        norm = (1.0 / degree[key].to(torch.float32)).unsqueeze(1)
        return graph, etype, norm, src

    def forward(self, model, structure, x):
        graph, etype, norm, src = structure
        h = torch.relu(model.convs[0](graph, etype, norm, src))
        return model.convs[1](graph, h, etype, norm, presorted=True)


# ---------------------------------------------------------------- GAT training


_gatconv_check = _nn_layer_check("GATConv")


class _DglGATLayer(torch.nn.Module):
    """DGL ``GATConv`` with PyG's output: heads concatenated, or averaged (``concat=False``)."""

    def __init__(self, in_channels, out_channels, heads=1, concat=True, dropout=0.0):
        super().__init__()
        from dgl.nn.pytorch import GATConv  # noqa: PLC0415 - optional library, through the shim

        self.conv = GATConv(in_channels, out_channels, heads, attn_drop=dropout, negative_slope=0.2, bias=True)
        self.concat = concat

    def forward(self, h, graph):
        out = self.conv(graph, h)
        return out.flatten(1) if self.concat else out.mean(dim=1)


_PYG_NAMES = {"lin.weight": "conv.fc.weight", "att_src": "conv.attn_l", "att_dst": "conv.attn_r", "bias": "conv.bias"}


class DglGATTraining:
    """DGL ``GATConv`` in the GAT model (``sparsetir.bench.gat``), its graph with PyG's self-loops
    (existing ones removed, one per node added); weights mapped from PyG's keys."""

    name = "dgl-gatconv"

    def available(self) -> tuple[bool, str]:
        return _gatconv_check("cpu")

    def model(self, dims: dict, state: dict):
        first = _DglGATLayer(dims["in"], dims["hidden"], dims["heads"], True, dims["dropout"])
        second = _DglGATLayer(dims["hidden"] * dims["heads"], dims["classes"], 1, False, dims["dropout"])
        model = _TwoLayers([first, second])
        model.load_state_dict({self.parameter_name(key): value for key, value in state.items()})
        self.dropout = dims["dropout"]
        return model

    @staticmethod
    def parameter_name(key: str) -> str:
        """This model's name of the PyG-keyed parameter ``key`` (``convs.<i>.lin.weight``, ...)."""
        _convs, layer, name = key.split(".", 2)
        return f"convs.{layer}.{_PYG_NAMES[name]}"

    def structure(self, task):
        dgl = _dgl()
        edge_index = task.graph["edge_index"]
        graph = dgl.graph((edge_index[0], edge_index[1]), num_nodes=task.graph["adj_t"].shape[0])
        return dgl.add_self_loop(dgl.remove_self_loop(graph))

    def forward(self, model, structure, x):
        from baselines.pyg import gat_forward  # noqa: PLC0415 - the model's one definition (PyG is not imported)

        return gat_forward(model, structure, x, self.dropout)


VARIANTS = {
    "spmm": {"dgl-gspmm": Variant(spmm_gspmm, devices=("cpu",), library_reference=True)},
    "sddmm": {"dgl-gsddmm": Variant(sddmm_gsddmm, devices=("cpu",), library_reference=True)},
    "sage": {"dgl": Variant(DglSage, devices=("cpu",), library_reference=True)},
    "rgcn": {"dgl-relgraphconv": Variant(relgraphconv, library_reference=True, check=_relgraphconv_check)},
    "rgcn-train": {"dgl-relgraphconv": Variant(DglRGCNTraining, devices=("cpu",), library_reference=True,
                                               check=_relgraphconv_check)},
    "gat": {"dgl-gatconv": Variant(DglGATTraining, devices=("cpu",), library_reference=True, check=_gatconv_check)},
}
