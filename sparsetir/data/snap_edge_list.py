"""SNAP-style edge lists: one ``source target`` pair per line, ``#`` starts a comment."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_coordinates
from .size_limits import size_limits

__all__ = ["read_edge_list"]


def read_edge_list(path: str | Path, *, relabel: bool = True, max_nnz: int | None = None,
                   max_bytes: int | None = None) -> sp.csr_matrix:
    """Read a whitespace- or tab-separated edge list into a square pattern CSR matrix.

    With ``relabel=True`` (the default) the ids that occur are renumbered ``0..n-1`` in
    ascending order, so non-contiguous SNAP ids give no empty rows; with ``relabel=False`` the
    ids are used as they are and ``n`` is the largest id plus one. Edges keep their direction;
    duplicates collapse to one entry. The file size (``max_bytes``), the edge count and the node
    count (``max_nnz``) are checked before the matrix is built (:mod:`sparsetir.data.size_limits`).
    """
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    limits.file(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpy warns on a file with no data rows
            edges = np.loadtxt(path, comments="#", dtype=np.int64, ndmin=2)
    except ValueError as err:
        raise ValueError(f"{path}: malformed edge list (expected two integer ids per line): {err}") from None
    if edges.size == 0:
        raise ValueError(f"{path}: the edge list contains no edges")
    if edges.shape[1] != 2:
        raise ValueError(f"{path}: expected two columns (source, target) per line, found {edges.shape[1]}")
    if edges.min() < 0:
        raise ValueError(f"{path}: node ids must be non-negative, found {edges.min()}")
    limits.entries(len(edges), str(path), "edges")
    if relabel:
        ids, positions = np.unique(edges, return_inverse=True)
        edges = positions.reshape(edges.shape)
        n = ids.size
    else:
        n = int(edges.max()) + 1
    limits.shape((n, n), str(path))
    return csr_from_coordinates(edges[:, 0], edges[:, 1], (n, n))
