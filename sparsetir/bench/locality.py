"""A locality bound for gather-bound kernels: the same matrix with its columns made local.

SpMM and SDDMM on the CPU gather one dense row per non-zero, at the column the non-zero names.
How fast that runs depends on the order of those columns: rows near each other in memory are
cheap, scattered ones cost a cache (or DRAM) miss each. :func:`local_columns` keeps everything a
kernel is sized by (shape, every row's degree, the values) and replaces row ``i``'s columns by
``i, i+1, ..., i+deg-1`` (mod n), so consecutive rows gather overlapping, consecutive dense rows.

Timing one kernel on both matrices separates the cost of the access pattern from the cost of the
code: no schedule of a kernel that reads the dense rows A names can beat its own time on the
local pattern by much, so that time bounds what scheduling alone can reach on the real one.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..runtime.validate import entry_rows


def local_columns(A: sp.csr_matrix) -> sp.csr_matrix:
    """A canonical CSR matrix with A's shape, row degrees and values (in A's order), whose row
    ``i`` stores columns ``i .. i+deg-1`` modulo ``n``, sorted."""
    A = sp.csr_matrix(A)
    m, n = A.shape
    degrees = np.diff(A.indptr).astype(np.int64)
    if degrees.size and degrees.max(initial=0) > n:
        raise ValueError(f"a row has {int(degrees.max())} non-zeros but the matrix has only {n} columns")
    rows = entry_rows(A.indptr)
    offsets = np.arange(A.nnz, dtype=np.int64) - A.indptr[rows]  # each entry's rank in its row
    columns = (rows + offsets) % max(n, 1)
    # the wrap-around puts small columns after large ones in a row: sort each row's columns
    order = np.lexsort((columns, rows))
    indices = columns[order].astype(A.indices.dtype, copy=False)
    return sp.csr_matrix((A.data.copy(), indices, A.indptr.copy()), shape=A.shape)
