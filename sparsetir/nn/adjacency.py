"""The graph structure a layer aggregates over: ``adj_t`` in CSR as dense index tensors.

Layers take the structure in any of the forms PyG and DGL users hold it, and read it as
:class:`Adjacency` (row = target node, column = source node):

- an ``edge_index`` tensor of shape ``(2, E)``, or a PyG ``EdgeIndex``: row 0 holds the sources,
  row 1 the targets (PyG's convention). It is converted by ``torch.ops.sparsetir.edge_index_to_csr``
  (cached per edge list), so ``torch.compile(fullgraph=True)`` traces through it;
- an ``(indptr, indices)`` pair of index tensors: adj_t in CSR;
- a torch sparse CSR (or COO) tensor or a scipy sparse matrix: adj_t, its values the edge
  weights. torch.compile does not trace sparse tensors, so these may break the graph;
- an :class:`Adjacency` (returned as is), or a list of them: one per layer (mini-batch blocks).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from ..ops import torch_ops  # noqa: F401 - registers torch.ops.sparsetir.*

__all__ = ["Adjacency", "as_adjacency"]


class Adjacency(NamedTuple):
    """adj_t in CSR: ``indptr`` (targets + 1), ``indices`` (source of each entry), ``values`` (edge
    weights in CSR order, ``None``: ones, or ``1 / degree`` for ``reduce="mean"``), ``num_cols`` (source nodes), ``reduce``: ``"sum"``
    (values as given) or ``"mean"`` (values already divided by each row's degree, or none: a
    row scale), and ``proof``: what
    :class:`~sparsetir.nn.NeighborSampler` attaches to the blocks it builds (valid by
    construction, with the transpose the backward needs; ``ops.torch_ops.sample_structure``). The
    ops honour it only for the tensors it was made for, unmodified; any other structure is
    validated."""

    indptr: Tensor
    indices: Tensor
    values: Tensor | None
    num_cols: int
    reduce: str = "sum"
    proof: object = None

    @property
    def num_rows(self) -> int:
        return self.indptr.shape[0] - 1

    def mean(self, dtype: torch.dtype = torch.float32) -> Adjacency:
        """The same structure with each row's values divided by its number of entries; an unweighted
        one stays without values (the mean is then a row scale, :meth:`row_scale`)."""
        if self.reduce == "mean":
            return self
        if self.values is None:
            return self._replace(reduce="mean")
        degree = self.indptr[1:] - self.indptr[:-1]
        scale = torch.repeat_interleave(self.row_scale(dtype), degree, output_size=self.indices.shape[0])
        return self._replace(values=self.values.to(dtype) * scale, reduce="mean")

    def row_scale(self, dtype: torch.dtype) -> Tensor:
        """``1 / degree`` per row (1 for an empty row)."""
        degree = self.indptr[1:] - self.indptr[:-1]
        return 1.0 / degree.clamp(min=1).to(dtype)

    def weights(self, dtype: torch.dtype) -> Tensor:
        """The per-entry values an SpMM takes: ones where none are stored, ``1 / degree`` for an
        unweighted mean."""
        if self.values is None:
            if self.reduce == "mean":
                degree = self.indptr[1:] - self.indptr[:-1]
                return torch.repeat_interleave(self.row_scale(dtype), degree, output_size=self.indices.shape[0])
            return torch.ones(self.indices.shape[0], dtype=dtype, device=self.indices.device)
        return self.values


def _is_edge_index(structure) -> bool:
    return isinstance(structure, Tensor) and not structure.is_sparse and structure.layout == torch.strided


def as_adjacency(structure, num_sources: int | None = None, num_targets: int | None = None) -> Adjacency:
    """``structure`` (any form in the module docstring) as :class:`Adjacency`.

    ``num_sources`` and ``num_targets``: the node counts (an edge list does not carry them;
    ``num_targets`` defaults to ``num_sources``, as for a graph).
    """
    if isinstance(structure, Adjacency):
        return structure
    if _is_edge_index(structure):
        if num_sources is None:
            raise ValueError("an edge_index needs the number of source nodes (num_sources)")
        if type(structure).__name__ == "EdgeIndex" and hasattr(structure, "as_tensor"):
            structure = structure.as_tensor()  # PyG's EdgeIndex: its plain (2, E) tensor
        targets = num_sources if num_targets is None else num_targets
        indptr, indices, _perm = torch.ops.sparsetir.edge_index_to_csr(structure, targets)
        return Adjacency(indptr, indices, None, num_sources)
    if isinstance(structure, tuple) and len(structure) == 2 and all(isinstance(t, Tensor) for t in structure):
        indptr, indices = structure
        if num_sources is None:
            raise ValueError("an (indptr, indices) pair needs the number of source nodes (num_sources)")
        return Adjacency(indptr, indices, None, num_sources)
    if isinstance(structure, Tensor) and structure.layout in (torch.sparse_csr, torch.sparse_coo):
        adj = structure.coalesce().to_sparse_csr() if structure.layout == torch.sparse_coo else structure
        return Adjacency(adj.crow_indices(), adj.col_indices(), adj.values(), adj.shape[1])
    if sp.issparse(structure):
        csr = structure.tocsr()
        data = csr.data if csr.data.flags.writeable else csr.data.copy()  # torch wants writable memory
        return Adjacency(torch.from_numpy(csr.indptr.astype(np.int64)), torch.from_numpy(csr.indices.astype(np.int64)),
                         torch.from_numpy(data), csr.shape[1])
    raise TypeError("the structure must be an edge_index tensor (2, E), a PyG EdgeIndex, an (indptr, indices) pair, "
                    "a torch sparse CSR/COO tensor or a scipy sparse matrix (adj_t), or an Adjacency; got "
                    f"{type(structure).__name__}")
