"""Sparse formats: each holds its Stage I axis structure and a host converter from CSR.

Strings are accepted wherever a format is expected (``"csr"``; more formats and the
``"hyb:8:1,2,4"`` family arrive with the formats issue).
"""

from __future__ import annotations

from .csr import CSR, CSRMatrix, read_sparse_input

# Formats named in the public contract that later work adds.
PLANNED = ("ell", "bsr", "dbsr", "srbcrs", "hyb", "auto")


def parse_format(fmt):
    """A format object for ``fmt`` (a format object or a string such as ``"csr"``)."""
    if isinstance(fmt, CSR):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"format must be a string or a format object, got {type(fmt).__name__}")
    name = fmt.split(":", 1)[0].strip().lower()
    if name == "csr" and fmt.strip().lower() == "csr":
        return CSR()
    if name in PLANNED:
        raise NotImplementedError(f"format {fmt!r} is not available yet; use 'csr'")
    raise ValueError(f"unknown format {fmt!r}; known: 'csr' (planned: {', '.join(PLANNED)})")


__all__ = ["CSR", "CSRMatrix", "parse_format", "read_sparse_input"]
