"""What every non-CSR format shares: its parameters, its input, and the map from slots back to CSR.

A format stores the non-zeros of the canonical CSR input (rows sorted, duplicates summed,
explicit zeros kept) in *slots* of its own arrays, plus padding. Each value array comes with a
``csr_position`` array of the same shape: the index of that slot's entry in the canonical CSR
``data``, or ``-1`` for padding. That one map is enough to go back (``to_csr``) and to hand a
kernel's per-slot results back in CSR order (``scatter_to_csr``, used by SDDMM).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .matrix import choose_index_dtype

PADDING = -1


def index_dtype_for(index_dtype: str, *extents: int) -> np.dtype:
    """The numpy index dtype; refuses int32 when an extent does not fit."""
    return np.dtype(choose_index_dtype(*extents, requested=index_dtype))


def rank_in_segment(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """For consecutive segments (``starts``, ``lengths``) covering 0..N-1: each element's offset in its segment."""
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(starts.astype(np.int64), lengths)


def exclusive_cumsum(counts: np.ndarray) -> np.ndarray:
    """``[0, c0, c0 + c1, ...]`` (length len(counts) + 1, int64)."""
    out = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


@dataclass
class SlotArray:
    """One group of slots: the row, column, value and CSR position of every slot (broadcastable)."""

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    csr_position: np.ndarray


class SlotMatrix:
    """Mixin for a converted matrix: ``to_csr`` and ``scatter_to_csr`` from its ``slot_arrays``.

    A subclass provides ``shape``, ``nnz`` and ``slot_arrays() -> dict[key, SlotArray]``
    (the keys name its value arrays in a fixed order).
    """

    def slot_arrays(self) -> dict:
        raise NotImplementedError

    def slot_positions(self) -> dict:
        """``csr_position`` of each value array, by the keys ``scatter_to_csr`` accepts."""
        return {key: slots.csr_position for key, slots in self.slot_arrays().items()}

    def to_csr(self) -> sp.csr_matrix:
        """The canonical CSR matrix this was converted from (padding dropped, explicit zeros kept)."""
        m, n = self.shape
        nnz = self.nnz
        groups = list(self.slot_arrays().values())
        index_dtype = np.result_type(*(np.asarray(g.cols).dtype for g in groups)) if groups else np.int32
        value_dtype = np.result_type(*(g.values.dtype for g in groups)) if groups else np.float32
        rows = np.zeros(nnz, dtype=np.int64)
        cols = np.zeros(nnz, dtype=index_dtype)
        data = np.zeros(nnz, dtype=value_dtype)
        filled = 0
        for group in groups:
            position = group.csr_position
            stored = position >= 0
            target = position[stored]
            shape = position.shape
            rows[target] = np.broadcast_to(group.rows, shape)[stored]
            cols[target] = np.broadcast_to(group.cols, shape)[stored]
            data[target] = group.values[stored]
            filled += target.shape[0]
        if filled != nnz:
            raise AssertionError(f"{type(self).__name__}: {filled} stored slots for {nnz} entries")
        indptr = exclusive_cumsum(np.bincount(rows, minlength=m)).astype(index_dtype)
        return sp.csr_matrix((data, cols, indptr), shape=(m, n))

    def scatter_to_csr(self, slot_values) -> np.ndarray:
        """Per-slot results (e.g. an SDDMM output per value array) as one array in canonical CSR order.

        ``slot_values``: a dict keyed like ``slot_positions()``, or a list in that order
        (nested lists are flattened), or a single array when there is one value array.
        Padding slots are ignored.
        """
        positions = self.slot_positions()
        if isinstance(slot_values, dict):
            unknown = set(slot_values) - set(positions)
            missing = [key for key in positions if key not in slot_values]
            if unknown or missing:
                raise ValueError(
                    f"{type(self).__name__}.scatter_to_csr: expected keys {list(positions)}, "
                    f"missing {missing}, unknown {sorted(map(repr, unknown))}"
                )
            arrays = [slot_values[key] for key in positions]
        else:
            if isinstance(slot_values, np.ndarray) or hasattr(slot_values, "__dlpack__"):
                slot_values = [slot_values]
            arrays = list(_flatten(slot_values))
            if len(arrays) != len(positions):
                raise ValueError(
                    f"{type(self).__name__}.scatter_to_csr: expected {len(positions)} arrays "
                    f"({list(positions)}), got {len(arrays)}"
                )
        arrays = [np.asarray(a) for a in arrays]
        dtype = np.result_type(*(a.dtype for a in arrays)) if arrays else np.float32
        out = np.zeros(self.nnz, dtype=dtype)
        for (key, position), array in zip(positions.items(), arrays):
            if array.shape != position.shape:
                raise ValueError(
                    f"{type(self).__name__}.scatter_to_csr: values for {key!r} have shape {array.shape}, "
                    f"expected {position.shape}"
                )
            stored = position >= 0
            out[position[stored]] = array[stored]
        return out


def _flatten(items):
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flatten(item)
        else:
            yield item
