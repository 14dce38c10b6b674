"""PyTorch modules on sparsetir's ops.

- :class:`RGCN` and :class:`RGCNConv`: R-GCN inference (PyG ``RGCNConv(aggr="mean")``), each
  layer one RGMS kernel over an :class:`RGCNGraph` (normalisation and root weight built in).
"""

from .rgcn import RGCN, RGCNConv, RGCNGraph

__all__ = ["RGCN", "RGCNConv", "RGCNGraph"]
