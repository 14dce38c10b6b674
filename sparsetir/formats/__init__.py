"""Sparse formats: each holds its Stage I axis structure and a host converter from CSR.

``fmt.convert(A)`` returns the format's host arrays (``to_csr()`` goes back). Strings are
accepted wherever a format is expected; ``parse_format`` reads them:

=========================  ==========================================
``"csr"``                  ``CSR()``
``"ell"``, ``"ell:32"``    ``ELL()``, ``ELL(32)``
``"bsr:16"``               ``BSR(16)``
``"dbsr:16"``              ``DBSR(16)``
``"srbcrs:8:16"``          ``SRBCRS(t=8, g=16)``
``"hyb"``, ``"hyb:8"``     ``Hyb()``, ``Hyb(col_parts=8)``
``"hyb:8:1,2,4,8"``        ``Hyb(col_parts=8, buckets=(1, 2, 4, 8))``
``"rcsr"``, ``"rcsr:32"``  ``RCSR()``, ``RCSR(parts=32)``
``"auto"``                 the tuning database (resolved by the ops, ``sparsetir.tune``)
=========================  ==========================================
"""

from __future__ import annotations

import re

from .bsr import BSR, BSRMatrix
from .csr import CSR, CSRMatrix, read_sparse_input
from .dbsr import DBSR, DBSRMatrix
from .ell import ELL, ELLMatrix
from .hyb import Hyb, HybBucket, HybMatrix
from .rcsr import RCSR, RCSRMatrix
from .srbcrs import SRBCRS, SRBCRSMatrix

FORMAT_CLASSES = (CSR, ELL, BSR, DBSR, SRBCRS, Hyb, RCSR)
# name -> (constructor, the fields after the name: (field, required, reader))
_FIELDS = {
    "csr": (CSR, ()),
    "ell": (ELL, (("width", False, "int"),)),
    "bsr": (BSR, (("block", True, "int"),)),
    "dbsr": (DBSR, (("block", True, "int"),)),
    "srbcrs": (SRBCRS, (("t", True, "int"), ("g", True, "int"))),
    "hyb": (Hyb, (("col_parts", False, "int"), ("buckets", False, "ints"))),
    "rcsr": (RCSR, (("parts", False, "int"),)),
}
_SYNTAX = {
    "csr": "csr",
    "ell": "ell or ell:<width>",
    "bsr": "bsr:<block>",
    "dbsr": "dbsr:<block>",
    "srbcrs": "srbcrs:<t>:<g>",
    "hyb": "hyb, hyb:<col_parts> or hyb:<col_parts>:<w1>,<w2>,...",
    "rcsr": "rcsr or rcsr:<parts>",
}


def parse_format(fmt):
    """A format object for ``fmt``: a format object (returned as is) or a string such as ``"hyb:8:1,2,4"``."""
    if isinstance(fmt, FORMAT_CLASSES):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"format must be a string or a format object, got {type(fmt).__name__}")
    name, *fields = [field.strip() for field in fmt.strip().lower().split(":")]
    if name == "auto":
        if fields:
            raise ValueError(f"format {fmt!r}: 'auto' takes no fields")
        raise ValueError("format 'auto' is a choice the ops make (sparsetir.ops.spmm/sddmm, compile_spmm/"
                         "compile_sddmm) from the tuning database; it is not a format object")
    if name not in _FIELDS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(_SYNTAX)}, auto (e.g. 'hyb:8:1,2,4')")
    constructor, spec = _FIELDS[name]
    where = f"format {fmt!r} (expected {_SYNTAX[name]})"
    if len(fields) > len(spec):
        raise ValueError(f"{where}: {len(fields) - len(spec)} extra field(s) {fields[len(spec):]}")
    missing = [field for field, required, _ in spec[len(fields):] if required]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    arguments = {}
    for text, (field, _, reader) in zip(fields, spec):
        if reader == "int":
            arguments[field] = _integer(text, field, where)
        elif not text:
            raise ValueError(f"{where}: {field} is empty")
        else:
            arguments[field] = [
                _integer(part.strip(), f"bucket width #{i + 1}", where) for i, part in enumerate(text.split(","))
            ]
    try:
        return constructor(**arguments)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _integer(text: str, field: str, where: str) -> int:
    if not text:
        raise ValueError(f"{where}: {field} is empty")
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(f"{where}: {field} must be an integer, got {text!r}")
    return int(text)


__all__ = [
    "BSR",
    "BSRMatrix",
    "CSR",
    "CSRMatrix",
    "DBSR",
    "DBSRMatrix",
    "ELL",
    "ELLMatrix",
    "FORMAT_CLASSES",
    "Hyb",
    "HybBucket",
    "HybMatrix",
    "RCSR",
    "RCSRMatrix",
    "SRBCRS",
    "SRBCRSMatrix",
    "parse_format",
    "read_sparse_input",
]
