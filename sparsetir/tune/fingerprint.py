"""A matrix fingerprint for the tuning database: shape, nnz and the degree histogram.

Two matrices with the same fingerprint get the same tuned configuration. The
histogram counts rows by ``ceil(log2(degree + 1))`` (bin 0: empty rows), which is
what format and schedule choices depend on, without hashing every index. Each input kind
declares its fingerprint (``formats.inputs``); this is the CSR one.
"""

from __future__ import annotations

from ..formats.inputs import csr_fingerprint as fingerprint
from ..formats.inputs import degree_histogram

__all__ = ["degree_histogram", "fingerprint"]
