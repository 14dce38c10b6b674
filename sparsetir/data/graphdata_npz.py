"""GraphData / GraphGallery ``.npz`` graphs, whose ``adj_matrix`` is a pickled scipy CSR matrix.

The pickle is read through the restricted unpickler, admitting only the numpy and scipy names
that such a payload needs (found by inspecting the files: a 0-d object array built with
``numpy.core.multiarray._reconstruct``, ``numpy.ndarray`` and ``numpy.dtype``, holding a
``scipy.sparse.csr.csr_matrix``), plus their current spellings in numpy 2 and scipy >= 1.8.
The unpickled object is not trusted: its arrays are validated and copied into a fresh matrix.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_arrays
from .safe_npz import read_npz_member
from .size_limits import size_limits

__all__ = ["GRAPHDATA_GLOBALS", "read_graphdata_npz"]


def _numpy_reconstruct():
    try:
        from numpy._core.multiarray import _reconstruct  # noqa: PLC0415 - where numpy 2 keeps it
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct  # noqa: PLC0415 - where numpy 1 keeps it
    return _reconstruct


#: Everything a GraphData ``adj_matrix`` pickle may reference.
GRAPHDATA_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct(),
    ("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct(),
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("scipy.sparse.csr", "csr_matrix"): sp.csr_matrix,
    ("scipy.sparse._csr", "csr_matrix"): sp.csr_matrix,
}


def read_graphdata_npz(path: str | Path, member: str = "adj_matrix", *, max_nnz: int | None = None,
                       max_bytes: int | None = None) -> sp.csr_matrix:
    """Read the pickled CSR adjacency ``member`` of a GraphData ``.npz`` as canonical CSR.

    The member is read under ``max_bytes``; the pickled shape and entry count are checked against
    ``max_nnz`` (:mod:`sparsetir.data.size_limits`) before the matrix is built.
    """
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    holder = read_npz_member(path, member, GRAPHDATA_GLOBALS, max_bytes=limits.max_bytes)
    if holder.shape != () or holder.dtype != object:
        raise TypeError(f"{path}[{member}]: expected a pickled sparse matrix, got an array of shape {holder.shape}")
    pickled = holder.item()
    if not isinstance(pickled, sp.csr_matrix):
        raise TypeError(f"{path}[{member}]: expected a scipy CSR matrix, got {type(pickled).__name__}")
    state = vars(pickled)
    missing = [key for key in ("data", "indices", "indptr", "_shape") if key not in state]
    if missing:
        raise ValueError(f"{path}[{member}]: the pickled CSR matrix lacks {', '.join(missing)}")
    arrays = [state[key] for key in ("indptr", "indices", "data")]
    if not all(isinstance(array, np.ndarray) and array.dtype != object for array in arrays):
        raise TypeError(f"{path}[{member}]: the pickled CSR matrix must hold numeric numpy arrays")
    try:
        limits.shape(tuple(state["_shape"]), f"{path}[{member}]")
    except TypeError:
        raise TypeError(f"{path}[{member}]: the pickled shape must be two integers, got {state['_shape']!r}") from None
    limits.entries(arrays[1].size, f"{path}[{member}]")
    try:
        return csr_from_arrays(*arrays, state["_shape"])
    except (ValueError, TypeError) as err:
        raise type(err)(f"{path}[{member}]: invalid adjacency: {err}") from None
