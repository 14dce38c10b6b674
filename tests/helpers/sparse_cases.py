"""Test inputs: hypothesis strategies for awkward CSR matrices, and the real graphs tests use."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import strategies as st

REAL_GRAPHS = ("cora", "citeseer", "pubmed", "ca-condmat", "ego-facebook")


@st.composite
def csr_matrices(draw, max_dim: int = 24, max_row: int = 8, duplicates: bool = True, sort: bool = False):
    """CSR matrices with any shape (0x0 included), empty rows, unsorted indices, optional
    duplicate entries, and int32 or int64 index arrays."""
    m = draw(st.integers(0, max_dim))
    n = draw(st.integers(0, max_dim))
    rows = []
    for _ in range(m):
        if n == 0:
            rows.append([])
            continue
        cols = draw(st.lists(st.integers(0, n - 1), max_size=max_row, unique=not duplicates))
        rows.append(sorted(set(cols)) if sort else cols)
    index_dtype = draw(st.sampled_from([np.int32, np.int64]))
    indptr = np.cumsum([0] + [len(c) for c in rows]).astype(index_dtype)
    indices = np.array([c for cols in rows for c in cols], dtype=index_dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.uniform(-1.0, 1.0, indices.size)
    return sp.csr_matrix((values, indices, indptr), shape=(m, n))


def real_graph(name: str) -> sp.csr_matrix:
    """A real graph from the shared mirror; skips with the reason when the mirror is absent."""
    from sparsetir import data

    try:
        return data.load(name)
    except FileNotFoundError as error:
        pytest.skip(f"real graph {name} unavailable: {error}")


def kitti_crop(voxel_size: float = 0.2, extent: int = 120):
    """``(coords, features)`` of a corner of KITTI scan 000000 voxelised (a few thousand voxels); skips
    the test when the scan is unavailable."""
    from sparsetir import data
    from sparsetir.ops import voxelize

    try:
        points = data.load("kitti-000000")
    except (OSError, ValueError) as error:
        pytest.skip(f"KITTI scan unavailable: {error}")
    coords, features = voxelize(points, voxel_size)
    keep = (coords[:, 1] < extent) & (coords[:, 2] < extent)
    return coords[keep], features[keep]


def random_dense(rows: int, cols: int, dtype, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (rows, cols)).astype(dtype)


def tolerance(dtype) -> dict:
    return {"rtol": 1e-4, "atol": 1e-4} if np.dtype(dtype) == np.float32 else {"rtol": 1e-10, "atol": 1e-10}
