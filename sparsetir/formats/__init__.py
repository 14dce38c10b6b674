"""Sparse formats: each holds its Stage I axis structure and a host converter from CSR.

``fmt.convert(A)`` returns the format's host arrays (``to_csr()`` goes back). Strings are
accepted wherever a format is expected; ``parse_format`` reads them:

=========================  ==========================================
``"csr"``                  ``CSR()``
``"ell"``, ``"ell:32"``    ``ELL()``, ``ELL(32)``
``"bsr"``, ``"bsr:16"``    ``BSR(16)`` (the block defaults to 16)
``"dbsr"``, ``"dbsr:16"``  ``DBSR(16)``
``"srbcrs:8:16"``          ``SRBCRS(t=8, g=16)``
``"hyb"``, ``"hyb:8"``     ``Hyb()``, ``Hyb(col_parts=8)``
``"hyb:8:1,2,4,8"``        ``Hyb(col_parts=8, buckets=(1, 2, 4, 8))``
``"rcsr"``, ``"rcsr:32"``  ``RCSR()``, ``RCSR(parts=32)``
``"auto"``                 the tuning database (resolved by the ops, ``sparsetir.tune``)
=========================  ==========================================

Every module in this folder is imported here, and each format registers itself
(``registry.register_format``), so a new format is one new module; ``base.Format`` documents
what it implements. Registered classes are attributes of this package by class name.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Field, Format
from .bsr import BSR, BSRMatrix
from .csr import CSR
from .dbsr import DBSR, DBSRMatrix
from .ell import ELL, ELLMatrix
from .hyb import Hyb, HybBucket, HybMatrix
from .matrix import CSRMatrix, read_sparse_input
from .rcsr import RCSR, RCSRMatrix
from .registry import format_class, parse_format, register_format, registered_formats
from .srbcrs import SRBCRS, SRBCRSMatrix

for _module in pkgutil.iter_modules(__path__):  # formats added as new modules register themselves here
    importlib.import_module(f"{__name__}.{_module.name}")


def __getattr__(name: str):
    """A registered format class by its class name (``sparsetir.formats.COO``)."""
    for cls in registered_formats():
        if cls.__name__ == name:
            return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BSR",
    "BSRMatrix",
    "CSR",
    "CSRMatrix",
    "DBSR",
    "DBSRMatrix",
    "ELL",
    "ELLMatrix",
    "Field",
    "Format",
    "Hyb",
    "HybBucket",
    "HybMatrix",
    "RCSR",
    "RCSRMatrix",
    "SRBCRS",
    "SRBCRSMatrix",
    "format_class",
    "parse_format",
    "read_sparse_input",
    "register_format",
    "registered_formats",
]
