"""Matrix Market (``.mtx``) files, as in the SuiteSparse collection."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from .csr_canonical import canonical_csr
from .size_limits import size_limits

__all__ = ["read_matrix_market"]


def read_matrix_market(path: str | Path, *, max_nnz: int | None = None,
                       max_bytes: int | None = None) -> sp.csr_matrix:
    """Read a Matrix Market file as canonical CSR.

    Symmetric files are expanded to both triangles (by ``scipy.io.mmread``); a ``pattern`` file
    gets float32 ones; a file with values keeps them in the dtype scipy reads (float64 for real).
    The header's shape and entry count are checked against ``max_nnz``, and the file size against
    ``max_bytes`` (:mod:`sparsetir.data.size_limits`), before the entries are read.
    """
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    limits.file(path)
    try:
        rows, cols, entries, layout, field, symmetry = scipy.io.mminfo(path)
    except (ValueError, OSError, IndexError, OverflowError) as err:
        raise ValueError(f"{path}: malformed Matrix Market file: {err}") from None
    limits.shape((rows, cols), str(path))
    stored = rows * cols if layout == "array" else entries * (1 if symmetry == "general" else 2)
    limits.entries(stored, str(path), "entries (after expanding symmetry)" if symmetry != "general" else "entries")
    try:
        matrix = scipy.io.mmread(_terminated(path))
    except (ValueError, OSError, IndexError, OverflowError) as err:
        raise ValueError(f"{path}: malformed Matrix Market file: {err}") from None
    if not sp.issparse(matrix):  # an "array" (dense) file
        matrix = sp.csr_matrix(np.asarray(matrix))
    return canonical_csr(matrix, pattern=(field == "pattern"))


def _terminated(path: Path):
    """``path`` itself when the file ends in a newline, else its bytes with one appended.

    scipy's parser (fast_matrix_market) reads past the end of its buffer when the file's last token
    is cut short (``3 2 2.0e`` or ``3 2 2x`` with no newline after it) and dies by SIGSEGV (issue
    27's fuzz suite); a final newline ends every token inside the buffer. The file's size is already
    within ``max_bytes``, so holding it once in memory is within the parser's limits."""
    with open(path, "rb") as handle:
        handle.seek(0, io.SEEK_END)
        if handle.tell() == 0:
            return path
        handle.seek(-1, io.SEEK_END)
        if handle.read(1) == b"\n":
            return path
        handle.seek(0)
        return io.BytesIO(handle.read() + b"\n")
