"""R-GCN entity-classification training baselines: the same two-layer model in PyG and DGL.

The model is PyG's ``examples/rgcn.py`` (Schlichtkrull et al.'s entity classification): a
featureless first layer (node ``j``'s input is its one-hot vector, so ``in_channels`` is the
number of nodes), a ReLU, and a second layer to the classes, both with basis decomposition and
mean aggregation. Weights come as one state_dict in the keys of ``sparsetir.nn.RGCN`` (PyG's
``RGCNConv`` names: ``convs.<i>.weight``, ``comp``, ``root``, ``bias``), so every contender
starts from the same weights.

=======================  ===================================================================
``pyg-rgcnconv``         PyG ``RGCNConv(aggr="mean", num_bases=B)``, ``conv(None, ...)`` first
``pyg-fastrgcnconv``     PyG ``FastRGCNConv``, the same arguments
``dgl-relgraphconv``     DGL: the featureless layer as DGL's message passing (each edge's message
                         the row ``W_r[source]`` of the combined basis weight, times the mean's
                         ``norm``, summed by ``update_all``: what ``RelGraphConv`` computes for
                         one-hot input without the ``(E, nodes)`` one-hot matrix), then
                         ``RelGraphConv(regularizer="basis", self_loop=True)``, edges sorted by type
=======================  ===================================================================

A contender is ``factory() -> object`` with the protocol of ``sparsetir.bench.training``:
``available()``, ``model(dims, state)``, ``structure(task)`` (``task.graph``: ``edge_index``,
``edge_type`` tensors and ``num_nodes``) and ``forward(model, structure, x) -> logits`` (``x`` is
None: the input is featureless).
"""

from __future__ import annotations

import importlib

from baselines.dgl_import import import_dgl

try:
    import torch
except ImportError:  # pragma: no cover - torch is a project dependency
    torch = None


def _pyg():
    try:
        return importlib.import_module("torch_geometric.nn"), None
    except Exception as error:  # ImportError, or a failure inside PyG's import under this torch
        return None, f"torch_geometric is not importable ({error}); install the bench extra"


class PygRGCN:
    """PyG ``RGCNConv`` or ``FastRGCNConv`` (``cls``), two layers."""

    def __init__(self, cls_name: str):
        self.cls_name = cls_name
        self.name = "pyg-" + cls_name.lower()

    def available(self) -> tuple[bool, str]:
        nn, why = _pyg()
        if nn is None:
            return False, why
        return True, f"torch_geometric {importlib.import_module('torch_geometric').__version__} {self.cls_name}"

    def model(self, dims: dict, state: dict):
        nn, _ = _pyg()
        cls = getattr(nn, self.cls_name)
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


class _TwoLayers(torch.nn.Module if torch is not None else object):
    def __init__(self, convs):
        super().__init__()
        self.convs = torch.nn.ModuleList(convs)


class DglRGCN:
    """DGL (see the module docstring); PyG keys mapped: ``linear_r.W = weight``, ``linear_r.coeff = comp``,
    ``loop_weight = root``, ``h_bias = bias``."""

    name = "dgl-relgraphconv"

    def available(self) -> tuple[bool, str]:
        dgl, why = import_dgl()
        if dgl is None:
            return False, why
        try:
            from dgl.nn.pytorch import RelGraphConv  # noqa: F401, PLC0415 - optional library, through the shim
        except Exception as error:  # DGL's nn package can fail on its own under a newer torch
            return False, f"dgl {dgl.__version__}: RelGraphConv does not import: {error}"
        return True, f"dgl {dgl.__version__} RelGraphConv on torch {torch.__version__}"

    def model(self, dims: dict, state: dict):
        from dgl.nn.pytorch import RelGraphConv  # noqa: PLC0415 - optional library, through the shim

        first = _DglFeaturelessLayer(dims["nodes"], dims["hidden"], dims["relations"], dims["bases"])
        second = RelGraphConv(dims["hidden"], dims["classes"], dims["relations"], regularizer="basis",
                              num_bases=dims["bases"], self_loop=True, bias=True)
        model = _TwoLayers([first, second])
        names = {"weight": "linear_r.W", "comp": "linear_r.coeff", "root": "loop_weight", "bias": "h_bias"}
        mapped = {}
        for key, value in state.items():
            _convs, layer, name = key.split(".")
            mapped[f"convs.{layer}.{name if layer == '0' else names[name]}"] = value
        model.load_state_dict(mapped)
        return model

    def structure(self, task):
        dgl, _ = import_dgl()
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


class _DglFeaturelessLayer(torch.nn.Module if torch is not None else object):
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


#: What the training benchmark reads: contender name -> factory.
RGCN_TRAIN_CONTENDERS = {"pyg-rgcnconv": lambda: PygRGCN("RGCNConv"),
                         "pyg-fastrgcnconv": lambda: PygRGCN("FastRGCNConv"),
                         "dgl-relgraphconv": DglRGCN}
