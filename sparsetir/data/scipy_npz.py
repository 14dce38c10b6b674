"""Sparse matrices saved with ``scipy.sparse.save_npz`` (e.g. ``reddit_graph.npz`` in DGL's reddit.zip).

The archive holds ``format`` (``coo``, ``csr`` or ``csc``), ``shape`` and the arrays of that
layout. It is read with ``allow_pickle=False``: nothing is unpickled.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .archive_member import open_member
from .csr_canonical import canonical_csr, csr_from_arrays, csr_from_coordinates

__all__ = ["read_scipy_npz", "read_scipy_npz_member"]


def _from_archive(archive, where: str) -> sp.csr_matrix:
    files = set(archive.files)
    if not {"format", "shape"} <= files:
        raise ValueError(f"{where}: not a scipy.sparse.save_npz file (it holds {', '.join(sorted(files))})")
    layout = archive["format"].item()
    layout = layout.decode() if isinstance(layout, bytes) else str(layout)
    shape = tuple(int(s) for s in archive["shape"])
    data = archive["data"] if "data" in files else None
    if layout == "coo":
        return csr_from_coordinates(archive["row"], archive["col"], shape, data)
    if layout == "csr":
        return csr_from_arrays(archive["indptr"], archive["indices"], data, shape)
    if layout == "csc":
        transposed = csr_from_arrays(archive["indptr"], archive["indices"], data, shape[::-1])
        return canonical_csr(transposed.T)
    raise ValueError(f"{where}: unsupported sparse format {layout!r} (expected coo, csr or csc)")


def read_scipy_npz(path: str | Path) -> sp.csr_matrix:
    """Read a ``save_npz`` file as canonical CSR."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            return _from_archive(archive, str(path))
    except (OSError, zipfile.BadZipFile, EOFError) as err:
        raise ValueError(f"{path}: not a readable .npz archive: {err}") from None


def read_scipy_npz_member(archive: str | Path, member: str) -> sp.csr_matrix:
    """Read a ``save_npz`` file stored as ``member`` of a zip/tar archive."""
    with open_member(archive, member) as stream:
        payload = io.BytesIO(stream.read())
    try:
        with np.load(payload, allow_pickle=False) as npz:
            return _from_archive(npz, f"{archive}[{member}]")
    except (OSError, zipfile.BadZipFile, EOFError) as err:
        raise ValueError(f"{archive}[{member}]: not a readable .npz archive: {err}") from None
