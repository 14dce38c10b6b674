"""METIS graph files (``.graph``), the input format of the METIS partitioner.

The first non-comment line is ``n m [fmt [ncon]]``: ``n`` vertices, ``m`` undirected edges.
``fmt`` has up to three digits: ``1`` edge weights, ``10`` vertex weights (``ncon`` of them),
``100`` vertex sizes. Then line ``i`` lists vertex ``i``'s neighbours, 1-based, each followed by
its edge weight when ``fmt`` says so. ``%`` starts a comment line. Every edge appears in both of
its vertices' lines, so the matrix has ``2 m`` entries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_arrays
from .size_limits import size_limits

__all__ = ["read_metis"]


def _ints(line: str, path: Path, lineno: int) -> list[int]:
    try:
        return [int(token) for token in line.split()]
    except ValueError:
        raise ValueError(f"{path}:{lineno}: expected integers, got {line.strip()[:60]!r}") from None


def read_metis(path: str | Path, *, max_nnz: int | None = None, max_bytes: int | None = None) -> sp.csr_matrix:
    """Read a METIS graph as canonical CSR (edge weights as float32 values, else a pattern).

    The file size (``max_bytes``) and the header's vertex and edge counts (``max_nnz``) are
    checked before the adjacency lines are parsed (:mod:`sparsetir.data.size_limits`).
    """
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    limits.file(path)
    lines = [(i + 1, line) for i, line in enumerate(path.read_text(encoding="ascii").splitlines())
             if not line.lstrip().startswith("%")]
    if not lines:
        raise ValueError(f"{path}: empty METIS file, expected the header 'n m [fmt [ncon]]'")
    header = _ints(lines[0][1], path, lines[0][0])
    if not 2 <= len(header) <= 4 or min(header) < 0:
        raise ValueError(f"{path}: header must be 'n m [fmt [ncon]]' with non-negative integers, got {lines[0][1]!r}")
    n, m = header[:2]
    limits.shape((n, n), str(path))
    limits.entries(2 * m, str(path), "adjacency entries (2 per edge)")
    fmt = f"{header[2]:03d}" if len(header) > 2 else "000"
    if len(fmt) != 3 or set(fmt) - {"0", "1"}:
        raise ValueError(f"{path}: fmt must be made of the digits 0 and 1 (e.g. 001, 011), got {header[2]}")
    has_sizes, has_vertex_weights, has_edge_weights = (digit == "1" for digit in fmt)
    ncon = header[3] if len(header) > 3 else (1 if has_vertex_weights else 0)
    skip = int(has_sizes) + (ncon if has_vertex_weights else 0)
    stride = 2 if has_edge_weights else 1
    body = lines[1:]
    while body and not body[-1][1].strip():  # trailing blank lines; blank lines inside are isolated vertices
        body.pop()
    if len(body) != n:
        raise ValueError(f"{path}: the header says {n} vertices but {len(body)} adjacency lines follow")
    degrees, neighbours, weights = np.zeros(n, np.int64), [], []
    for vertex, (lineno, line) in enumerate(body):
        values = _ints(line, path, lineno)[skip:]
        if len(values) % stride:
            raise ValueError(f"{path}:{lineno}: neighbour/weight pairs are incomplete")
        degrees[vertex] = len(values) // stride
        neighbours.extend(values[::stride])
        if has_edge_weights:
            weights.extend(values[1::stride])
    columns = np.asarray(neighbours, dtype=np.int64) - 1
    if columns.size != 2 * m:
        raise ValueError(f"{path}: the header says {m} edges ({2 * m} adjacency entries) but there are {columns.size}")
    if columns.size and (columns.min() < 0 or columns.max() >= n):
        raise ValueError(f"{path}: neighbour ids must lie in 1..{n}")
    indptr = np.concatenate([[0], np.cumsum(degrees)])
    data = np.asarray(weights, dtype=np.float32) if has_edge_weights else None
    return csr_from_arrays(indptr, columns, data, (n, n))
