"""Stage I transformations: ``sparse_reorder`` and ``sparse_fuse``."""

from .fuse import sparse_fuse
from .reorder import sparse_reorder

__all__ = ["sparse_fuse", "sparse_reorder"]
