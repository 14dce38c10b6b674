"""Sparse matrices saved with ``scipy.sparse.save_npz`` (e.g. ``reddit_graph.npz`` in DGL's reddit.zip).

The archive holds ``format`` (``coo``, ``csr`` or ``csc``), ``shape`` and the arrays of that
layout. It is read with ``allow_pickle=False``: nothing is unpickled. The archive's declared
uncompressed size is checked against ``max_bytes``, and its shape and entry count against
``max_nnz`` (:mod:`sparsetir.data.size_limits`), before any array is read.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .archive_member import open_member
from .csr_canonical import canonical_csr, csr_from_arrays, csr_from_coordinates
from .safe_npz import NPZ_READ_ERRORS
from .size_limits import SizeLimits, size_limits

__all__ = ["read_scipy_npz", "read_scipy_npz_member"]


def _from_archive(archive, where: str, limits: SizeLimits) -> sp.csr_matrix:
    limits.archive(archive.zip, where)
    files = set(archive.files)
    if not {"format", "shape"} <= files:
        raise ValueError(f"{where}: not a scipy.sparse.save_npz file (it holds {', '.join(sorted(files))})")
    layout = archive["format"].item()
    layout = layout.decode() if isinstance(layout, bytes) else str(layout)
    shape = tuple(int(s) for s in archive["shape"])
    limits.shape(shape, where)
    if layout not in ("coo", "csr", "csc"):
        raise ValueError(f"{where}: unsupported sparse format {layout!r} (expected coo, csr or csc)")
    index = archive["row" if layout == "coo" else "indices"]
    limits.entries(index.size, where)
    data = archive["data"] if "data" in files else None
    if layout == "coo":
        return csr_from_coordinates(index, archive["col"], shape, data)
    if layout == "csr":
        return csr_from_arrays(archive["indptr"], index, data, shape)
    transposed = csr_from_arrays(archive["indptr"], index, data, shape[::-1])  # csc
    return canonical_csr(transposed.T)


def read_scipy_npz(path: str | Path, *, max_nnz: int | None = None, max_bytes: int | None = None) -> sp.csr_matrix:
    """Read a ``save_npz`` file as canonical CSR."""
    limits = size_limits(max_nnz, max_bytes)
    try:
        with np.load(path, allow_pickle=False) as archive:
            return _from_archive(archive, str(path), limits)
    except NPZ_READ_ERRORS as err:
        raise ValueError(f"{path}: not a readable .npz archive: {err}") from None


def read_scipy_npz_member(archive: str | Path, member: str, *, max_nnz: int | None = None,
                          max_bytes: int | None = None) -> sp.csr_matrix:
    """Read a ``save_npz`` file stored as ``member`` of a zip/tar archive (read under ``max_bytes``)."""
    limits = size_limits(max_nnz, max_bytes)
    with open_member(archive, member) as stream:
        payload = io.BytesIO(limits.read(stream, f"{archive}[{member}]"))
    try:
        with np.load(payload, allow_pickle=False) as npz:
            return _from_archive(npz, f"{archive}[{member}]", limits)
    except NPZ_READ_ERRORS as err:
        raise ValueError(f"{archive}[{member}]: not a readable .npz archive: {err}") from None
