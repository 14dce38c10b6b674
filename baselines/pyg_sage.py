"""PyG GraphSAGE (``torch_geometric.nn.SAGEConv``, mean aggregation) for the training benchmark.

Without pyg-lib or torch-sparse (no wheels here), PyG's CPU paths for ``SAGEConv`` are the
structure it is given. Each is a contender:

- ``pyg-csr``: a torch sparse CSR ``adj_t`` (``torch.sparse.mm(adj_t, x, reduce="mean")``);
- ``pyg-edge_index``: a plain ``(2, E)`` edge list (gather, then ``scatter`` mean);
- ``pyg-EdgeIndex``: PyG's ``EdgeIndex``, sorted by target (its sparse-aware matmul).

Mini-batches are bipartite layers (``conv((x, x[:targets]), edge_index, size)``), the blocks a
neighbour sampler made: each a CSR ``adj_t`` given as ``(indptr, indices, num_sources,
num_targets)`` numpy arrays. The model's state_dict keys are PyG ``GraphSAGE``'s
(``convs.<i>.lin_l.weight``, ...), so every contender starts from the same weights.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

try:
    import torch
    import torch_geometric
    from torch_geometric import EdgeIndex
    from torch_geometric.nn import SAGEConv
except ImportError as error:
    torch_geometric = None
    _IMPORT_ERROR = f"torch_geometric is not importable ({error}); install the bench extra"
else:
    _IMPORT_ERROR = None

STRUCTURES = ("csr", "edge_index", "EdgeIndex")


def available() -> tuple[bool, str]:
    """Whether PyG imports, and why not."""
    if torch_geometric is None:
        return False, _IMPORT_ERROR
    return True, f"torch_geometric {torch_geometric.__version__} on torch {torch.__version__}"


@contextlib.contextmanager
def _quiet():
    """Without torch's beta warnings for sparse CSR tensors."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
        yield


class PygGraphSAGE(torch.nn.Module if torch_geometric is not None else object):
    """``num_layers`` PyG ``SAGEConv`` (mean), relu and dropout between them."""

    def __init__(self, in_channels: int, hidden: int, num_layers: int, out_channels: int, dropout: float):
        super().__init__()
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

    def available(self) -> tuple[bool, str]:
        return available()

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
            return EdgeIndex(edge_index, sparse_size=(sources, targets), sort_order="col")
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


#: What the training benchmark reads: contender name -> contender.
SAGE_CONTENDERS = {f"pyg-{structure}": (lambda s=structure: PygSage(s)) for structure in STRUCTURES}
