"""The input every format converts from: a validated CSR matrix in the dtypes a kernel uses.

``read_sparse_input`` accepts scipy sparse matrices, torch sparse CSR/COO tensors and
``CSRMatrix``; it checks the structure once (``runtime.validate``) and, when asked, makes it
canonical (rows sorted, duplicates summed, explicit zeros kept).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..runtime.validate import check_indices, check_indptr, numpy_dtype

INT32_LIMIT = 2**31 - 1
VALUE_DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass
class CSRMatrix:
    """Host arrays of a CSR matrix in the dtypes a kernel uses."""

    shape: tuple
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    def to_csr(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.values, self.indices, self.indptr), shape=self.shape)


def read_sparse_input(A, *, canonical: bool = False) -> CSRMatrix:
    """Validated CSR arrays of a scipy sparse matrix or torch sparse tensor (dtypes unchanged).

    ``canonical``: sum duplicates and sort indices within rows (explicit zeros are kept).
    """
    if isinstance(A, CSRMatrix):
        if canonical:
            return read_sparse_input(A.to_csr(), canonical=True)
        return A
    if sp.issparse(A):
        if A.ndim != 2:
            raise ValueError(f"A must be 2-D, got {A.ndim}-D")
        csr = A.tocsr()
        if canonical and not csr.has_canonical_format:
            csr = csr.copy()
            csr.sum_duplicates()
        shape, indptr, indices, values = csr.shape, csr.indptr, csr.indices, csr.data
    elif type(A).__module__.startswith("torch"):
        shape, indptr, indices, values = _torch_csr_arrays(A)
        if canonical:
            merged = sp.csr_matrix((values, indices, indptr), shape=shape)
            merged.sum_duplicates()
            indptr, indices, values = merged.indptr, merged.indices, merged.data
    else:
        raise TypeError(f"A must be a scipy.sparse matrix or a torch sparse tensor, got {type(A).__name__}")
    rows, cols = (int(s) for s in shape)
    check_indptr(indptr, name="A.indptr", rows=rows, nnz=indices.shape[0])
    check_indices(indices, name="A.indices", length=cols)
    if values.shape != indices.shape:
        raise ValueError(f"A has {values.shape[0]} values but {indices.shape[0]} indices (nnz mismatch)")
    return CSRMatrix((rows, cols), indptr, indices, values)


def _torch_csr_arrays(A):
    import torch  # noqa: PLC0415 - torch loads only for torch inputs (the runtime runs numpy without it)

    if A.requires_grad and torch.is_grad_enabled():
        raise TypeError("A's values require grad, but this call is not recorded by autograd (its result would be "
                        "detached silently); call it under torch.no_grad() or pass A.detach()")
    if A.layout == torch.sparse_coo:
        A = A.coalesce().to_sparse_csr()
    if A.layout != torch.sparse_csr:
        raise TypeError(f"a torch A must be a sparse CSR (or COO) tensor, got layout {A.layout}")
    if A.dim() != 2:
        raise ValueError(f"A must be 2-D, got {A.dim()}-D")
    return (
        tuple(A.shape),
        A.crow_indices().cpu().numpy(),
        A.col_indices().cpu().numpy(),
        A.values().cpu().numpy(),
    )


def transpose(matrix: CSRMatrix) -> tuple[CSRMatrix, np.ndarray]:
    """``A^T`` as CSR (A's CSC arrays), with ``order``: entry ``p`` of ``A^T`` is entry ``order[p]`` of A.

    Vectorised and stable: a stable sort of the column indices keeps each column's entries in row
    order; duplicates are kept (both copies, in A's order). Index dtypes are kept.
    """
    m, n = matrix.shape
    indices = np.asarray(matrix.indices)
    order = np.argsort(indices, kind="stable")
    rows = np.repeat(np.arange(m, dtype=indices.dtype), np.diff(np.asarray(matrix.indptr)))
    indptr = np.zeros(n + 1, dtype=np.asarray(matrix.indptr).dtype)
    np.cumsum(np.bincount(indices, minlength=n), out=indptr[1:])
    return CSRMatrix((n, m), indptr, rows[order], np.asarray(matrix.values)[order]), order


def choose_index_dtype(*extents: int, requested: str | None = None) -> str:
    """int32 unless some extent (or flat buffer size) needs int64; ``requested`` forces one."""
    if requested is not None:
        if requested not in ("int32", "int64"):
            raise TypeError(f"index_dtype must be 'int32' or 'int64', got {requested!r}")
        if requested == "int32" and max(extents, default=0) > INT32_LIMIT:
            raise ValueError(f"an extent of {max(extents)} does not fit int32 indices; use index_dtype='int64'")
        return requested
    return "int64" if max(extents, default=0) > INT32_LIMIT else "int32"


def cast_values(values: np.ndarray, dtype: str, *, name: str = "A") -> np.ndarray:
    """``values`` in ``dtype``; refuses a cast that changes kind (complex -> float, ...)."""
    if dtype not in VALUE_DTYPES:
        raise TypeError(f"unsupported dtype {dtype!r}; supported: {VALUE_DTYPES}")
    target = numpy_dtype(dtype)
    if values.dtype == target:
        return values
    if values.dtype.kind not in "fiub" or (dtype != "bfloat16" and not np.can_cast(values.dtype, target, "same_kind")):
        raise TypeError(f"{name} has dtype {values.dtype}, which cannot be cast to {dtype}")
    return values.astype(target)
