"""Make a directed adjacency matrix undirected."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .csr_canonical import canonical_csr

__all__ = ["symmetrize"]


def symmetrize(matrix) -> sp.csr_matrix:
    """Return the canonical CSR union of ``matrix`` and its transpose.

    Each entry becomes ``max(A[i, j], A[j, i])``, so a pattern of ones stays a pattern of ones and
    an edge listed in both directions is not counted twice. Weights must be non-negative (a
    negative weight would lose to the implicit zero of the missing direction).
    """
    csr = canonical_csr(matrix)
    rows, cols = csr.shape
    if rows != cols:
        raise ValueError(f"only a square matrix can be symmetrised, got shape {csr.shape}")
    if csr.nnz and np.iscomplexobj(csr.data):
        raise TypeError("cannot symmetrise a complex matrix by taking the maximum")
    if csr.nnz and csr.data.min() < 0:
        raise ValueError(f"cannot symmetrise negative weights (minimum {csr.data.min()}) by taking the maximum")
    return canonical_csr(csr.maximum(csr.T))
