"""DGL GraphSAGE (``dgl.nn.SAGEConv``, mean aggregation) for the training benchmark, through the shim.

The whole graph is a ``dgl.graph`` (edges source -> target); mini-batch blocks are
``dgl.create_block`` message-flow graphs. DGL's layer projects before aggregating when its
input is wider than its output, as sparsetir's does. Weights come in PyG ``GraphSAGE``'s
state_dict keys and are mapped: ``fc_neigh.weight = lin_l.weight``, ``fc_self.weight =
lin_r.weight``, ``fc_self.bias = lin_l.bias``.
"""

from __future__ import annotations

import numpy as np

from baselines.dgl_import import import_dgl

try:
    import torch
except ImportError:  # pragma: no cover - torch is a project dependency
    torch = None


def available() -> tuple[bool, str]:
    """Whether DGL imports (shimmed), and why not."""
    dgl, reason = import_dgl()
    if dgl is None:
        return False, reason
    return True, f"dgl {dgl.__version__} on torch {torch.__version__}"


class DglGraphSAGE(torch.nn.Module):
    """``num_layers`` DGL ``SAGEConv`` (mean), relu and dropout between them."""

    def __init__(self, in_channels: int, hidden: int, num_layers: int, out_channels: int, dropout: float):
        super().__init__()
        dgl, reason = import_dgl()
        if dgl is None:
            raise RuntimeError(reason)
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

    def available(self) -> tuple[bool, str]:
        return available()

    def model(self, in_channels: int, hidden: int, num_layers: int, out_channels: int, dropout: float, state: dict):
        model = DglGraphSAGE(in_channels, hidden, num_layers, out_channels, dropout)
        model.load_state_dict(dgl_state(state))
        return model

    def full_graph(self, adj_t):
        dgl, _ = import_dgl()
        rows = np.repeat(np.arange(adj_t.shape[0], dtype=np.int64), np.diff(adj_t.indptr))
        sources = torch.from_numpy(adj_t.indices.astype(np.int64))
        return dgl.graph((sources, torch.from_numpy(rows)), num_nodes=adj_t.shape[0])

    def blocks(self, blocks: list) -> list:
        dgl, _ = import_dgl()
        out = []
        for indptr, indices, sources, targets in blocks:
            rows = np.repeat(np.arange(targets, dtype=np.int64), np.diff(indptr))
            out.append(dgl.create_block((torch.from_numpy(np.asarray(indices, dtype=np.int64)), torch.from_numpy(rows)),
                                        num_src_nodes=sources, num_dst_nodes=targets))
        return out

    def forward(self, model, x, structure):
        return model(x, structure)


#: What the training benchmark reads: contender name -> contender.
SAGE_CONTENDERS = {"dgl": DglSage}
