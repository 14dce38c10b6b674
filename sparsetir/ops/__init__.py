"""User-level ops, each a few lines composing IR, formats, transforms, schedules and the backend."""

from .sddmm import compile_sddmm, sddmm, sddmm_function
from .spmm import compile_spmm, spmm, spmm_function

__all__ = ["compile_sddmm", "compile_spmm", "sddmm", "sddmm_function", "spmm", "spmm_function"]
