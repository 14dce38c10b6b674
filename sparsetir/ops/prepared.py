"""Prepared kernels reused by structure content: what the function forms of the ops call.

``spmm(A, B)``, ``sddmm(A, X, Y)``, ``rgms(adj, X, W)``, ``sparse_attention(q, k, v, layout)``
and ``sparse_conv3d(features, kmap, weight)`` each bind a compiled function to a structure. A
structure seen before (the same arrays by content, with the same options) reuses the kernel
bound to it from :data:`PREPARED`, a bounded least-recently-used cache, so calling an op again
with the same structure costs a comparison of the structure, not its validation, conversion and
binding again (values are part of the content: a kernel holds its values). The comparison is exact (``np.array_equal`` against the cache's own copy, after
shapes and dtypes): a structure edited in place since it was cached no longer matches and is
prepared (validated) again. Compiled code is shared anyway (``operands.compiled_function``).

A kernel that holds private read-only copies of the structure (``owned_structure``: the arrays in the
order given, e.g. ``ops.spmm``'s :class:`~sparsetir.ops.spmm.FreshCSR`) is compared against those
where they have the caller's shapes and dtypes, instead of a second copy.

Entries are bounded by count (:data:`CAPACITY`) and by the bytes of the structures they hold
(:data:`CAPACITY_BYTES`; a larger structure is prepared without being kept).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["CAPACITY", "CAPACITY_BYTES", "PREPARED", "PreparedKernels", "options_key"]

#: Structures kept (least recently used dropped first).
CAPACITY = 32
#: Bytes of structure arrays kept in all (the kernels' own copies counted as much again).
CAPACITY_BYTES = 256 << 20


def options_key(*parts) -> tuple:
    """A hashable key of an op's options: dicts as sorted ``(name, repr(value))`` pairs, formats
    and targets by ``repr``, everything else as given."""
    key = []
    for part in parts:
        if isinstance(part, dict):
            key.append(tuple(sorted((str(k), repr(v)) for k, v in part.items())))
        elif isinstance(part, (str, int, float, bool, type(None), tuple)):
            key.append(part)
        else:
            key.append(repr(part))
    return tuple(key)


class PreparedKernels:
    """A bounded cache: (options key, structure arrays by content) -> prepared kernel."""

    def __init__(self, capacity: int = CAPACITY, capacity_bytes: int = CAPACITY_BYTES):
        self.capacity, self.capacity_bytes = capacity, capacity_bytes
        self._entries: OrderedDict[int, tuple] = OrderedDict()  # id -> (key, signature, arrays, kernel, bytes)
        self._by_signature: dict[tuple, list[int]] = {}  # (key, signature) -> the entries' ids, oldest first
        self._bytes = 0
        self._lock = threading.RLock()
        self.hits = self.misses = 0

    def get(self, key: tuple, arrays: Sequence[np.ndarray], build: Callable[[], object]):
        """The kernel prepared for ``key`` and structure ``arrays`` (numpy arrays), ``build()`` on a miss.

        Only the entries of the same key and array shapes and dtypes are compared (an index by both), so a
        structure that matches none (a stream of sampled blocks, each of its own size) costs a dictionary
        lookup before it is built, not a scan of the cache."""
        arrays = tuple(np.asarray(a) for a in arrays)
        signature = tuple((a.shape, a.dtype.str) for a in arrays)
        with self._lock:
            for slot in reversed(self._by_signature.get((key, signature), ())):
                owned, kernel = self._entries[slot][2:4]
                if all(np.array_equal(o, a) for o, a in zip(owned, arrays)):
                    self._entries.move_to_end(slot)
                    self.hits += 1
                    return kernel
            self.misses += 1
        kernel = build()  # validation, conversion and compile run outside the lock
        size = 2 * sum(a.nbytes for a in arrays)
        if size <= self.capacity_bytes:
            owned = getattr(kernel, "owned_structure", None)  # the kernel's own private copies, where it has them
            if owned is None or any(o.shape != a.shape or o.dtype != a.dtype or o.flags.writeable
                                    for o, a in zip(owned, arrays)):
                owned = tuple(np.array(a, copy=True) for a in arrays)
            with self._lock:
                self._entries[id(owned)] = (key, signature, owned, kernel, size)
                self._by_signature.setdefault((key, signature), []).append(id(owned))
                self._bytes += size
                while len(self._entries) > self.capacity or self._bytes > self.capacity_bytes:
                    slot, (old_key, old_signature, _, _, old_size) = self._entries.popitem(last=False)
                    self._bytes -= old_size
                    slots = self._by_signature[(old_key, old_signature)]
                    slots.remove(slot)
                    if not slots:
                        del self._by_signature[(old_key, old_signature)]
        return kernel

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_signature.clear()
            self._bytes = 0
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


#: The cache the ops' function forms share.
PREPARED = PreparedKernels()
