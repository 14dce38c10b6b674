"""Lowering passes: Stage I -> Stage II (``lower_sparse_iter``) -> Stage III (``lower_sparse_buffer``)."""

from .lower_sparse_buffer import SIGNATURE_ATTR, flat_shape, lower_sparse_buffer
from .lower_sparse_iter import lower_sparse_iter
from .stage2 import Stage2Function, format_stage2


def lower(func):
    """Stage I function -> Stage III PrimFunc (both passes)."""
    return lower_sparse_buffer(lower_sparse_iter(func))


__all__ = [
    "SIGNATURE_ATTR",
    "Stage2Function",
    "flat_shape",
    "format_stage2",
    "lower",
    "lower_sparse_buffer",
    "lower_sparse_iter",
]
