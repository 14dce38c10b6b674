"""Input validation in one place (in the spirit of scipy.sparse's ``check_format``).

Every op and every compiled function checks its inputs here *before* a kernel
runs, so bad input raises a ``ValueError``/``TypeError`` naming the problem
instead of crashing or silently returning garbage.
"""

from __future__ import annotations

from functools import cache

import numpy as np

INDEX_DTYPES = (np.dtype("int32"), np.dtype("int64"))


def check_index_array(array, *, name: str) -> np.ndarray:
    """A 1-D integer numpy array (any int width); returns it as an ndarray."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(array).__name__}")
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must have an integer dtype, got {array.dtype}")
    return array


def check_indptr(indptr, *, name: str, rows: int, nnz: int | None = None) -> None:
    """``indptr`` has rows + 1 entries, starts at 0, never decreases and ends at ``nnz``."""
    indptr = check_index_array(indptr, name=name)
    if indptr.shape[0] != rows + 1:
        raise ValueError(f"{name} must have {rows + 1} entries (rows + 1), got {indptr.shape[0]}")
    if indptr[0] != 0:
        raise ValueError(f"{name}[0] must be 0, got {indptr[0]}")
    steps = np.diff(indptr)
    if steps.size and steps.min() < 0:
        row = int(np.argmax(steps < 0))
        raise ValueError(
            f"{name} must be non-decreasing: {name}[{row}]={indptr[row]} > {name}[{row + 1}]={indptr[row + 1]}"
        )
    if nnz is not None and indptr[-1] != nnz:
        raise ValueError(f"{name}[-1]={indptr[-1]} does not match nnz={nnz} (the length of the indices/values)")


def check_indices(indices, *, name: str, length: int, nnz: int | None = None) -> None:
    """Every entry of ``indices`` lies in [0, length)."""
    indices = check_index_array(indices, name=name)
    if nnz is not None and indices.shape[0] != nnz:
        raise ValueError(f"{name} has {indices.shape[0]} entries but nnz is {nnz}")
    if indices.size:
        low, high = indices.min(), indices.max()
        if low < 0:
            raise ValueError(f"{name} has a negative index {low}")
        if high >= length:
            raise ValueError(f"{name} has index {high} out of range for length {length}")


def check_sorted_rows(indptr: np.ndarray, indices: np.ndarray, *, name: str) -> None:
    """Indices strictly increase within each row (needed by binary searches)."""
    if indices.size < 2:
        return
    increasing = np.diff(indices) > 0
    row_starts = indptr[1:-1]
    boundary = np.zeros(indices.size - 1, dtype=bool)
    starts = row_starts[(row_starts > 0) & (row_starts < indices.size)]
    boundary[starts - 1] = True
    bad = ~increasing & ~boundary
    if bad.any():
        at = int(np.argmax(bad))
        raise ValueError(f"{name} must be sorted without duplicates within each row (position {at})")


def check_coordinates(values, *, name: str, length: int, axis: str) -> None:
    """Every entry of an integer buffer used as a coordinate of ``axis`` lies in [0, length).

    The kernels guard such accesses, so an entry out of range would be dropped silently;
    this names the buffer and the first bad position (in flat, row-major order) instead.
    """
    flat = np.asarray(values).reshape(-1)
    if not flat.size:
        return
    bad = (flat < 0) | (flat >= length)
    if bad.any():
        at = int(np.argmax(bad))
        raise ValueError(f"{name}[{at}] = {int(flat[at])} is out of range: {name} indexes axis {axis}, whose "
                         f"coordinates lie in [0, {length})")


def check_permutation(order, *, name: str) -> None:
    """``order`` is a permutation of ``0 .. len(order) - 1`` (an integer array)."""
    order = check_index_array(np.asarray(order), name=name)
    if order.size and not np.array_equal(np.sort(order), np.arange(order.size)):
        raise ValueError(f"{name} is not a permutation of 0..{order.size - 1}")


def entry_rows(indptr: np.ndarray) -> np.ndarray:
    """The row of every stored entry of a CSR ``indptr`` (int64)."""
    return np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))


def check_distinct_rows(indptr: np.ndarray, indices: np.ndarray, length: int, *, name: str) -> None:
    """No coordinate repeats within one row (kernels write such rows in parallel)."""
    if indices.size < 2:
        return
    keys = entry_rows(indptr) * max(int(length), 1) + indices.astype(np.int64)
    if np.unique(keys).size != keys.size:
        raise ValueError(f"{name} repeats a coordinate within a row, but its axis promises distinct coordinates")


def check_disjoint_rows(indptr: np.ndarray, indices: np.ndarray, *, name: str) -> None:
    """No coordinate occurs in two rows (kernels write the rows' coordinates in parallel)."""
    if indices.size < 2:
        return
    rows = entry_rows(indptr)
    order = np.lexsort((rows, indices))
    coords, owners = indices[order], rows[order]
    shared = (coords[1:] == coords[:-1]) & (owners[1:] != owners[:-1])
    if shared.any():
        at = int(coords[1:][shared][0])
        raise ValueError(f"{name} lists coordinate {at} in two rows, but its axis promises disjoint rows")


def check_dense(array, *, name: str, shape: tuple, dtype) -> None:
    """A dense operand with the expected shape and dtype (numpy or torch).

    This runs on every kernel call, so the common case costs few attribute lookups.
    """
    if array.shape != shape and tuple(array.shape) != tuple(shape):
        actual_shape = tuple(array.shape)
        if len(actual_shape) != len(shape):
            raise ValueError(f"{name} must be {len(shape)}-D with shape {shape}, got shape {actual_shape}")
        raise ValueError(f"{name} has shape {actual_shape}, expected {tuple(shape)}")
    if not _dtype_matches(array.dtype, dtype):
        raise TypeError(f"{name} has dtype {dtype_name(array)}, expected {_numpy_dtype(dtype).name}")


@cache
def _numpy_dtype(dtype) -> np.dtype:
    return numpy_dtype(dtype)


@cache
def _dtype_matches(actual, dtype) -> bool:
    """Whether an array's dtype (numpy or torch) has the numpy name of ``dtype``: one dictionary lookup
    a call (comparing a torch dtype with a numpy one asks numpy to convert it, microseconds each)."""
    name = actual.name if isinstance(actual, np.dtype) else str(actual).replace("torch.", "")
    return name == _numpy_dtype(dtype).name


def numpy_dtype(dtype) -> np.dtype:
    """``np.dtype(dtype)``, with ``"bfloat16"`` as ml_dtypes' bfloat16 (numpy has none of its own)."""
    if str(dtype) == "bfloat16":
        try:
            import ml_dtypes  # noqa: PLC0415 - optional: only bfloat16 host arrays need it (apache-tvm brings it)
        except ImportError:
            raise TypeError("bfloat16 numpy arrays need the ml_dtypes package (pip install ml_dtypes), "
                            "or pass torch bfloat16 tensors") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def dtype_name(array) -> str:
    """numpy-style dtype name of a numpy array or torch tensor."""
    dtype = array.dtype
    if isinstance(dtype, np.dtype):
        return dtype.name
    return str(dtype).replace("torch.", "")
