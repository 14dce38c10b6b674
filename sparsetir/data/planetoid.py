"""Planetoid ``ind.<name>.graph`` adjacency lists (Cora, Citeseer, Pubmed).

The file is a Python 2 pickle of ``collections.defaultdict(list)`` mapping a node id to the list
of its neighbour ids. It is read through the restricted unpickler, which admits only
``defaultdict`` and ``list``.
"""

from __future__ import annotations

import collections
import itertools
import pickle
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_coordinates
from .safe_pickle import RefusedGlobalError, RestrictedUnpickler
from .size_limits import size_limits

__all__ = ["PLANETOID_GLOBALS", "read_planetoid_graph"]

#: Everything a Planetoid graph pickle may reference (Python 2 spells ``list`` ``__builtin__.list``).
PLANETOID_GLOBALS = {
    ("collections", "defaultdict"): collections.defaultdict,
    ("__builtin__", "list"): list,
    ("builtins", "list"): list,
}


def _integer_ids(ids: list, path: Path) -> np.ndarray:
    """The node ids as an int64 array; anything but integers is a ``ValueError``."""
    if not ids:
        return np.zeros(0, dtype=np.int64)
    try:
        array = np.array(ids)
    except (ValueError, TypeError, OverflowError) as err:
        raise ValueError(f"{path}: node ids must be integers: {err}") from None
    if array.ndim != 1 or not (np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_):
        raise ValueError(f"{path}: node ids must be integers, found values of dtype {array.dtype}")
    return array.astype(np.int64)


def read_planetoid_graph(path: str | Path, *, max_nnz: int | None = None,
                         max_bytes: int | None = None) -> sp.csr_matrix:
    """Read a Planetoid adjacency-list pickle into an n×n pattern CSR matrix.

    ``n`` is the largest node id, as a key *or* as a neighbour, plus one: ids that appear only in
    a neighbour list still get a row. Duplicate neighbours collapse to one entry; self-loops stay.
    ``max_nnz`` and ``max_bytes`` guard the size (:mod:`sparsetir.data.size_limits`): a small
    pickle that repeats one long neighbour list is refused before the edges are built.
    """
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    limits.file(path)
    try:
        with path.open("rb") as stream:
            adjacency = RestrictedUnpickler(stream, PLANETOID_GLOBALS, encoding="latin1").load()
    except RefusedGlobalError as err:
        raise RefusedGlobalError(f"{path}: {err}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError) as err:
        raise ValueError(f"{path}: truncated or corrupt Planetoid pickle: {err}") from None
    if not isinstance(adjacency, dict):
        raise TypeError(f"{path}: expected a dict of adjacency lists, got {type(adjacency).__name__}")
    if not adjacency:
        raise ValueError(f"{path}: the adjacency dict is empty")
    neighbour_lists = list(adjacency.values())
    if not all(isinstance(neighbours, list) for neighbours in neighbour_lists):
        raise TypeError(f"{path}: every adjacency entry must be a list of neighbour ids")
    limits.entries(len(neighbour_lists), str(path), "adjacency lists")
    degrees = np.fromiter(map(len, neighbour_lists), dtype=np.int64, count=len(neighbour_lists))
    limits.entries(int(degrees.sum()), str(path), "edges")
    sources = _integer_ids(list(adjacency.keys()), path)
    targets = _integer_ids(list(itertools.chain.from_iterable(neighbour_lists)), path)
    if sources.min() < 0 or (targets.size and targets.min() < 0):
        raise ValueError(f"{path}: node ids must be non-negative")
    n = int(max(sources.max(), targets.max(initial=-1))) + 1
    limits.shape((n, n), str(path))
    return csr_from_coordinates(np.repeat(sources, degrees), targets, (n, n))
