"""PyTorch modules on sparsetir's ops: GraphSAGE, its structure and a neighbour sampler.

- :class:`SAGEConv` and :class:`GraphSAGE`: PyG's constructor arguments, ``reset_parameters``
  and state_dict keys; the aggregation is ``torch.ops.sparsetir.spmm`` (autograd, fake kernel),
  so ``torch.compile(model, fullgraph=True)`` traces a model whose structure is an edge list,
  an ``EdgeIndex`` or an ``(indptr, indices)`` pair.
- :class:`Adjacency` and :func:`as_adjacency`: the structure forms the layers accept.
- :class:`NeighborSampler`: seeded, vectorised uniform neighbour sampling into per-layer blocks.
- :class:`GATConv`: PyG's ``GATConv`` (arguments, semantics, state_dict) on one fused op,
  ``sparsetir.ops.edge_softmax_aggregate`` (scores, softmax, attention dropout, aggregation).
- :class:`RGCNConv` and :class:`RGCN`: PyG's ``RGCNConv`` (arguments, semantics, state_dict),
  trainable, on RGMS; :class:`RGCNGraph`, a relational structure prepared once.
"""

from .adjacency import Adjacency, as_adjacency
from .gat import GATConv
from .rgcn import RGCN, RGCNConv, RGCNGraph
from .sage import GraphSAGE, SAGEConv
from .sampling import MiniBatch, NeighborSampler

__all__ = ["Adjacency", "GATConv", "GraphSAGE", "MiniBatch", "NeighborSampler", "RGCN", "RGCNConv", "RGCNGraph",
           "SAGEConv", "as_adjacency"]
