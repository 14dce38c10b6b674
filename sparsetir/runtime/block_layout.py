"""The one validator of a block layout (block-sparse attention's mask), for every layout type.

A layout says which ``block x block`` tiles of the score matrix are kept: ``(q_blocks, k_blocks)``
shared by every head, or ``(heads, q_blocks, k_blocks)`` one per head. It may come as a numpy array,
a dense or sparse torch tensor, or a scipy sparse matrix (2-D). :func:`check_block_layout` checks it
*before* anything densifies or indexes it (a scipy matrix whose block column is out of range would
otherwise be written past its array by ``toarray``) and returns the canonical form every consumer
uses: a C-contiguous numpy bool array, ``True`` where a block is kept (a non-zero value; duplicates
of a sparse matrix are summed first, as scipy does).

It is used by ``ops.sparse_attention``/``compile_sparse_attention``, by the float64 reference and
the baselines (``reference.sparse_attention.block_layout``), and by ``runtime.load`` of an exported
attention kernel, which keeps its layout in the structure sidecar.
"""

from __future__ import annotations

import numpy as np

MAX_LAYOUT_BLOCKS = 1 << 28  # blocks of a dense layout (256 Mi booleans); beyond is a ValueError, not a MemoryError


def check_block_layout(layout, *, name: str = "layout") -> np.ndarray:
    """``layout`` validated and canonical: a numpy bool array ``(rows, cols)`` or ``(heads, rows, cols)``.

    Raises
    ------
    TypeError
        Not a numpy array, torch tensor or scipy sparse matrix; values that are not booleans or
        real numbers.
    ValueError
        Not 2-D or 3-D (a scipy matrix: 2-D), an empty dimension, non-finite values, too many
        blocks, or a sparse layout whose structure is broken (indptr not monotone or of the wrong
        length, a block index negative or out of range), each naming ``name`` and the field.
    """
    if _is_scipy_sparse(layout):
        array = _from_scipy(layout, name)
    elif type(layout).__module__.startswith("torch"):
        array = _from_torch(layout, name)
    elif isinstance(layout, np.ndarray):
        array = _dense(layout, name)
    else:
        raise TypeError(f"{name} must be a numpy array, torch tensor or scipy sparse matrix, got "
                        f"{type(layout).__name__}")
    return np.ascontiguousarray(array)


def _is_scipy_sparse(layout) -> bool:
    return type(layout).__module__.startswith("scipy.sparse")


def _check_shape(shape, name: str, ndims=(2, 3)) -> tuple:
    shape = tuple(int(d) for d in shape)
    if len(shape) not in ndims:
        raise ValueError(f"{name} must be (rows, cols) blocks, or (heads, rows, cols) for a layout per head; got "
                         f"shape {shape}")
    if 0 in shape or min(shape) < 0:
        raise ValueError(f"{name} has an empty dimension: shape {shape}")
    if int(np.prod(shape, dtype=object)) > MAX_LAYOUT_BLOCKS:
        raise ValueError(f"{name} has shape {shape}: over {MAX_LAYOUT_BLOCKS} blocks; use larger blocks")
    return shape


def _check_values(values: np.ndarray, name: str) -> None:
    if values.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold booleans or real numbers, got dtype {values.dtype}")
    if values.dtype.kind == "f" and values.size and not np.isfinite(values).all():
        raise ValueError(f"{name} has a NaN or infinite value: a block is kept (non-zero) or not (0)")


def _dense(array: np.ndarray, name: str) -> np.ndarray:
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold booleans or real numbers, got dtype {array.dtype}")
    _check_shape(array.shape, name)
    _check_values(array, name)
    return array != 0


def _from_torch(tensor, name: str) -> np.ndarray:
    import torch  # noqa: PLC0415 - only torch layouts need torch (the runtime runs without it)

    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a numpy array, torch tensor or scipy sparse matrix, got "
                        f"{type(tensor).__name__}")
    real = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
    if tensor.dtype not in real and not tensor.dtype.is_floating_point:
        raise TypeError(f"{name} must hold booleans or real numbers, got dtype {tensor.dtype}")
    if tensor.device.type == "meta":
        raise ValueError(f"{name} is a meta tensor: it holds no values")
    tensor = tensor.detach()
    if tensor.layout != torch.strided:
        return _from_torch_sparse(tensor, name)
    if tensor.dtype in (torch.float16, torch.bfloat16):
        tensor = tensor.float()
    return _dense(tensor.cpu().numpy(), name)


def _from_torch_sparse(tensor, name: str) -> np.ndarray:
    """A sparse torch layout through scipy's structure checks (torch builds such tensors unchecked)."""
    import scipy.sparse as sp  # noqa: PLC0415 - with the sparse layouts only
    import torch  # noqa: PLC0415 - only torch layouts need torch

    shape = _check_shape(tensor.shape, name, ndims=(2,))
    if tensor.dtype in (torch.float16, torch.bfloat16):
        tensor = tensor.float()
    if tensor.layout == torch.sparse_coo:
        indices = tensor._indices().cpu().numpy()
        _coo_in_range(indices[0], indices[1], shape, name)
        return _from_scipy(sp.coo_matrix((tensor._values().cpu().numpy(), (indices[0], indices[1])), shape=shape),
                           name)
    if tensor.layout == torch.sparse_csr:
        return _from_scipy(sp.csr_matrix((tensor.values().cpu().numpy(), tensor.col_indices().cpu().numpy(),
                                          tensor.crow_indices().cpu().numpy()), shape=shape), name)
    raise TypeError(f"{name} is a torch tensor of layout {tensor.layout}; pass a dense, COO or CSR tensor")


def _coo_in_range(rows, cols, shape, name: str) -> None:
    for field, ids, extent in (("row", rows, shape[0]), ("col", cols, shape[1])):
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"{name}.{field} must be integers, got dtype {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= extent):
            bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
            raise ValueError(f"{name}.{field} has block index {bad}, out of range for {extent} block "
                             f"{'rows' if field == 'row' else 'columns'}")


def _from_scipy(matrix, name: str) -> np.ndarray:
    shape = _check_shape(matrix.shape, name, ndims=(2,))
    fmt = matrix.format
    _check_values(np.asarray(matrix.data), name)
    if fmt in ("csr", "csc"):
        major, minor = (shape[0], shape[1]) if fmt == "csr" else (shape[1], shape[0])
        _check_compressed(matrix.indptr, matrix.indices, major, minor, name, fmt, np.asarray(matrix.data).shape[0])
        coo = matrix.tocoo()
    elif fmt == "bsr":
        r, c = matrix.blocksize
        _check_compressed(matrix.indptr, matrix.indices, shape[0] // max(r, 1), shape[1] // max(c, 1), name, fmt,
                          np.asarray(matrix.data).shape[0])
        coo = matrix.tocoo()
    elif fmt == "coo":
        rows, cols = (matrix.coords if hasattr(matrix, "coords") else (matrix.row, matrix.col))
        _coo_in_range(rows, cols, shape, name)
        coo = matrix
    elif fmt in ("dok", "lil", "dia"):  # built by checked insertions / offsets that toarray clips
        coo = matrix.tocoo()
    else:
        raise TypeError(f"{name} is a scipy matrix of format {fmt!r}; pass csr, csc, coo, bsr, dok, lil or dia")
    rows, cols = (coo.coords if hasattr(coo, "coords") else (coo.row, coo.col))
    _coo_in_range(rows, cols, shape, name)
    dense = np.zeros(shape, dtype=np.float64)
    np.add.at(dense, (np.asarray(rows, np.int64), np.asarray(cols, np.int64)), np.asarray(coo.data, np.float64))
    return dense != 0


def _check_compressed(indptr, indices, major: int, minor: int, name: str, fmt: str, nnz: int) -> None:
    """A compressed matrix's structure (scipy builds csr/csc/bsr from arrays without checking them)."""
    indptr, indices = np.asarray(indptr), np.asarray(indices)
    for field, array in (("indptr", indptr), ("indices", indices)):
        if array.ndim != 1 or array.dtype.kind not in "iu":
            raise ValueError(f"{name}.{field} must be a 1-D integer array, got {array.dtype} {array.shape}")
    if indptr.shape[0] != major + 1:
        raise ValueError(f"{name}.indptr must have {major + 1} entries for a {fmt} layout, got {indptr.shape[0]}")
    if indptr[0] != 0 or (np.diff(indptr.astype(np.int64)) < 0).any():
        raise ValueError(f"{name}.indptr must start at 0 and never decrease")
    if indptr[-1] > min(indices.shape[0], nnz):
        raise ValueError(f"{name}.indptr ends at {int(indptr[-1])} but {name}.indices has {indices.shape[0]} "
                         f"entries and {name}.data {nnz}")
    used = indices[:int(indptr[-1])]
    if used.size and (used.min() < 0 or used.max() >= minor):
        bad = int(used.min()) if used.min() < 0 else int(used.max())
        what = "columns" if fmt != "csc" else "rows"
        raise ValueError(f"{name}.indices has block index {bad}, out of range for {minor} block {what}")
