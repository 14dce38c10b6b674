"""Stage I transformations: ``sparse_reorder``, ``sparse_fuse``, ``format_decompose``, ``horizontal_fuse``,
``widen_accumulation``, ``stage_tile``, ``stage_rows``; and ``specialize`` on Stage III."""

from .decompose import FormatRewriteRule, format_decompose
from .fuse import sparse_fuse
from .horizontal_fuse import horizontal_fuse
from .precision import widen_accumulation
from .reorder import sparse_reorder
from .specialize import specialize
from .stage_rows import stage_rows
from .stage_tile import stage_tile

__all__ = ["FormatRewriteRule", "format_decompose", "horizontal_fuse", "sparse_fuse", "sparse_reorder", "specialize",
           "stage_rows", "stage_tile", "widen_accumulation"]
