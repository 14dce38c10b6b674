"""Matrix Market (``.mtx``) files, as in the SuiteSparse collection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from .csr_canonical import canonical_csr

__all__ = ["read_matrix_market"]


def read_matrix_market(path: str | Path) -> sp.csr_matrix:
    """Read a Matrix Market file as canonical CSR.

    Symmetric files are expanded to both triangles (by ``scipy.io.mmread``); a ``pattern`` file
    gets float32 ones; a file with values keeps them in the dtype scipy reads (float64 for real).
    """
    path = Path(path)
    try:
        _rows, _cols, _entries, layout, field, _symmetry = scipy.io.mminfo(path)
        matrix = scipy.io.mmread(path)
    except (ValueError, OSError, IndexError, OverflowError) as err:
        raise ValueError(f"{path}: malformed Matrix Market file: {err}") from None
    if not sp.issparse(matrix):  # an "array" (dense) file
        matrix = sp.csr_matrix(np.asarray(matrix))
    return canonical_csr(matrix, pattern=(field == "pattern"))
