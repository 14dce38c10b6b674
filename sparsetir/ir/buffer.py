"""Sparse buffers: values laid out over a tuple of axes (Stage I).

A buffer holds only values; its structure comes from its axes, so ``A(I, J)`` and
``C(I, J)`` share ``J``'s indptr/indices. In a sparse iteration, buffers are
indexed by *coordinates* and read like ordinary tensors::

    C[i, k] += A[i, j] * B[j, k]
"""

from __future__ import annotations

import threading

from tvm import tirx

from .axis import Axis

VALUE_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "uint8")  # uint8: a mask, read and cast

_recording = threading.local()


class SparseBuffer:
    """Values of a (possibly sparse) tensor over ``axes``.

    ``axes`` must list every axis after its parent, directly after it:
    ``(I, J, K)`` with ``J`` a child of ``I`` is fine, ``(J, I)`` is not.
    """

    def __init__(self, name: str, axes, dtype: str = "float32"):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"buffer name must be an identifier, got {name!r}")
        axes = tuple(axes)
        if not axes:
            raise ValueError(f"buffer {name} needs at least one axis")
        for position, axis in enumerate(axes):
            if not isinstance(axis, Axis):
                raise TypeError(f"buffer {name}: axes must be Axis objects, got {type(axis).__name__}")
            if axis.parent is not None and (position == 0 or axes[position - 1] is not axis.parent):
                raise ValueError(
                    f"buffer {name}: axis {axis.name} must come directly after its parent {axis.parent.name}"
                )
        if len(set(map(id, axes))) != len(axes):
            raise ValueError(f"buffer {name}: an axis appears twice")
        if dtype not in VALUE_DTYPES:
            raise TypeError(f"buffer {name}: dtype must be one of {VALUE_DTYPES}, got {dtype!r}")
        self.name = name
        self.axes = axes
        self.dtype = dtype
        # Stage I view: indexed by coordinates, like a dense tensor.
        self.coordinate_view = tirx.decl_buffer([axis.length for axis in axes], dtype, name)
        # Stage II view: indexed by positions along each axis.
        self.position_view = tirx.decl_buffer([_position_extent(axis) for axis in axes], dtype, name)

    def chains(self) -> list[list[Axis]]:
        """Group the axes into chains (root plus descendants); each chain is one flat dimension."""
        chains: list[list[Axis]] = []
        for axis in self.axes:
            if axis.parent is None:
                chains.append([axis])
            else:
                chains[-1].append(axis)
        return chains

    def __getitem__(self, index):
        stack = getattr(_recording, "stack", None)
        indices = _as_index_list(self, index)
        if stack:
            stack[-1].record_load(self, indices)
        return tirx.BufferLoad(self.coordinate_view, indices)

    def __setitem__(self, index, value):
        stack = getattr(_recording, "stack", None)
        if not stack:
            raise RuntimeError(
                f"{self.name}[...] = ... is only valid inside a function decorated with sparse_iteration"
            )
        stack[-1].record_store(self, _as_index_list(self, index), value)

    def __repr__(self) -> str:
        return f"SparseBuffer({self.name}, ({', '.join(a.name for a in self.axes)}), {self.dtype})"


def _position_extent(axis: Axis):
    if axis.parent is None:
        return axis.chain_size()
    if axis.is_variable:
        return axis.nnz
    return axis.nnz_cols


def _as_index_list(buffer: SparseBuffer, index) -> list:
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) != len(buffer.axes):
        raise IndexError(f"{buffer.name} has {len(buffer.axes)} axes but was indexed with {len(index)}")
    out = []
    for entry in index:
        if isinstance(entry, bool) or not isinstance(entry, (int, tirx.Expr)):
            raise TypeError(f"{buffer.name}: index must be an iterator or integer expression, got {entry!r}")
        out.append(tirx.const(entry, buffer.axes[0].idtype) if isinstance(entry, int) else entry)
    return out


class recording:
    """Context manager that routes ``buffer[...]`` reads and stores to ``recorder``."""

    def __init__(self, recorder):
        self.recorder = recorder

    def __enter__(self):
        if not hasattr(_recording, "stack"):
            _recording.stack = []
        _recording.stack.append(self.recorder)
        return self.recorder

    def __exit__(self, *exc):
        _recording.stack.pop()
        return False
