"""DLMC ``.smtx`` files (the Sputnik format of the Deep Learning Matrix Collection).

Line 1 is ``rows, cols, nnz``; line 2 the ``rows + 1`` CSR row offsets; line 3 the ``nnz``
column indices. The files hold a sparsity pattern only, so values are float32 ones.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_arrays
from .size_limits import size_limits

__all__ = ["read_smtx"]


def _integers(line: str, what: str, path: Path) -> np.ndarray:
    try:
        return np.array(line.split(), dtype=np.int64)
    except (ValueError, OverflowError):
        bad = next((token for token in line.split() if not token.lstrip("-").isdigit()), None)
        found = f"found {bad[:40]!r}" if bad is not None else "a value overflows int64"
        raise ValueError(f"{path}: {what} must be integers, {found}") from None


def read_smtx(path: str | Path, *, max_nnz: int | None = None, max_bytes: int | None = None) -> sp.csr_matrix:
    """Read a DLMC ``.smtx`` file as a canonical pattern CSR matrix, validating every part.

    The file size (``max_bytes``) and the header's shape and nnz (``max_nnz``) are checked first
    (:mod:`sparsetir.data.size_limits`).
    """
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    limits.file(path)
    try:
        text = path.read_text(encoding="ascii")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not an ASCII .smtx file: {err}") from None
    lines = text.rstrip("\r\n").splitlines()
    if not lines or not lines[0].strip():
        raise ValueError(f"{path}: empty file, expected the header line 'rows, cols, nnz'")
    header = re.split(r"[,\s]+", lines[0].strip())
    if len(header) != 3 or not all(token.isdigit() for token in header):
        raise ValueError(f"{path}: header must be 'rows, cols, nnz' (three non-negative integers), got {lines[0]!r}")
    rows, cols, nnz = (int(token) for token in header)
    limits.shape((rows, cols), str(path))
    limits.entries(nnz, str(path))
    expected_lines = 3 if nnz else 2
    if len(lines) not in (expected_lines, 3):
        raise ValueError(
            f"{path}: expected 3 lines (header, row offsets, column indices), found {len(lines)}; "
            "the file may be truncated"
        )
    offsets = _integers(lines[1], "row offsets", path)
    columns = _integers(lines[2], "column indices", path) if len(lines) == 3 else np.zeros(0, np.int64)
    if offsets.size != rows + 1:
        raise ValueError(f"{path}: {offsets.size} row offsets for {rows} rows, expected {rows + 1}")
    if offsets[-1] != nnz:
        raise ValueError(f"{path}: the last row offset is {offsets[-1]} but the header says nnz = {nnz}")
    if columns.size != nnz:
        raise ValueError(
            f"{path}: {columns.size} column indices but the header says nnz = {nnz}; the file may be truncated"
        )
    try:
        return csr_from_arrays(offsets, columns, None, (rows, cols))
    except (ValueError, TypeError) as err:
        raise type(err)(f"{path}: {err}") from None
