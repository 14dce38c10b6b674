"""What each op computes, as a float64 numpy/scipy reference (importable without the compiler).

Every module in this folder is imported here and registers its op's
:class:`~sparsetir.reference.registry.OpReference`; ``get_reference(op)`` finds it.
"""

import importlib
import pkgutil

from .case import Case, host_array, result_mismatch, rounding_tolerance
from .registry import OpReference, get_reference, reference_names, register_reference

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["Case", "OpReference", "get_reference", "host_array", "reference_names", "register_reference",
           "result_mismatch", "rounding_tolerance"]
