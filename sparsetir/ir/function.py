"""A Stage I function: sparse iterations run in order over shared buffers and axes."""

from __future__ import annotations

import tvm_ffi
from tvm import tirx
from tvm.ir.expr import TensorLoad

from .axis import Axis
from .buffer import SparseBuffer
from .iteration import SparseIteration


class SparseFunction:
    """Sparse iterations run in order over shared buffers and axes.

    Parameters
    ----------
    name : str
        The kernel symbol.
    iterations : list of SparseIteration
        Run one after the other.
    params : list of SparseBuffer, optional
        The buffers the caller passes, in the compiled signature's order (default: every buffer
        used, in order of first use); metadata arrays and symbolic sizes follow them. A buffer
        the iterations use but ``params`` leaves out is an *intermediate*: the kernel allocates
        it, and an earlier iteration must write it before one reads it.
    fused_groups : sequence of (iteration names, disjoint)
        Iterations run as one loop (``transform.horizontal_fuse``).
    tiles : sequence of (producer, consumer, depth, disjoint)
        Consumers computed inside their producer's ``depth`` outer loops (``transform.stage_tile``).
    """

    def __init__(self, name: str, iterations, params=None, fused_groups=(), tiles=()):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"function name must be an identifier, got {name!r}")
        iterations = [iterations] if isinstance(iterations, SparseIteration) else list(iterations)
        if not iterations:
            raise ValueError(f"function {name} has no sparse iteration")
        for it in iterations:
            if not isinstance(it, SparseIteration):
                raise TypeError(f"function {name}: expected SparseIteration, got {type(it).__name__}")
        used: list[SparseBuffer] = []
        for it in iterations:
            used.extend(b for b in it.buffers if b not in used)
        if params is None:
            params = used
        params = list(params)
        bad = [type(b).__name__ for b in params if not isinstance(b, SparseBuffer)]
        if bad:
            raise TypeError(f"function {name}: params must be SparseBuffers, got {bad}")
        self.name = name
        self.iterations = iterations
        self.buffers = params
        self.intermediates = [b for b in used if b not in params]
        _check_written_before_read(name, iterations, self.intermediates)
        self.axes = _axes_of(params + self.intermediates, iterations)
        self.size_vars = _size_vars_of(self.axes)
        self.idtype = _common_index_dtype(name, self.axes)
        self.fused_groups = tuple((tuple(names), bool(disjoint)) for names, disjoint in fused_groups)
        self.tiles = tuple((str(p), str(c), int(d), bool(disjoint)) for p, c, d, disjoint in tiles)
        self._check_names()
        self._check_fused_groups()

    def with_iterations(self, iterations) -> SparseFunction:
        """A copy with new iterations (used by transforms); buffers and fused groups are kept."""
        return SparseFunction(self.name, iterations, self.buffers, self.fused_groups, self.tiles)

    def _check_fused_groups(self) -> None:
        order = [it.name for it in self.iterations]
        seen: set = set()
        for names, _ in self.fused_groups:
            missing = [n for n in names if n not in order]
            if missing:
                raise ValueError(f"function {self.name}: fused iterations {missing} do not exist")
            if seen & set(names):
                raise ValueError(f"function {self.name}: an iteration is in two fused groups")
            seen |= set(names)
            start = order.index(names[0])
            if tuple(order[start:start + len(names)]) != names:
                raise ValueError(f"function {self.name}: fused iterations {list(names)} must be consecutive")

    def metadata(self) -> list[tirx.Var]:
        """Metadata buffers (indptr/indices) of every axis, in axis order."""
        return [buf for axis in self.axes for buf in axis.metadata()]

    def _check_names(self) -> None:
        seen: dict[str, str] = {}
        entries = [(b.name, "buffer") for b in self.buffers]
        entries += [(m.name, f"metadata of axis {a.name}") for a in self.axes for m in a.metadata()]
        entries += [(v.name, "size") for v in self.size_vars]
        for entry, what in entries:
            if entry in seen and not (what == "size" and seen[entry] == "size"):
                raise ValueError(f"function {self.name}: name {entry!r} is used by a {seen[entry]} and a {what}")
            seen[entry] = what
        size_names = [v.name for v in self.size_vars]
        duplicates = {n for n in size_names if size_names.count(n) > 1}
        if duplicates:
            raise ValueError(
                f"function {self.name}: distinct size variables share the names {sorted(duplicates)}; "
                f"create each size once with size_var() and reuse it"
            )

    def __repr__(self) -> str:
        return f"SparseFunction({self.name}, {len(self.iterations)} iteration(s))"

    def __str__(self) -> str:
        from .printer import format_stage1  # noqa: PLC0415 - the printer imports this module

        return format_stage1(self)


def _loaded(expr) -> list:
    """The coordinate views loaded in ``expr``."""
    found = []
    tvm_ffi.structural_walk(expr, [(TensorLoad, lambda load: found.append(load.source))])
    return found


def _check_written_before_read(name: str, iterations, intermediates) -> None:
    """Each intermediate is read only after an earlier iteration wrote it (a ValueError otherwise)."""
    views = {b.coordinate_view: b for b in intermediates}
    written: set = set()
    for it in iterations:
        for store in it.stores:
            reads = [v for e in (store.value, *store.indices) for v in _loaded(e)]
            if store.accumulate and it.init_of(store) is None:
                reads.append(store.buffer.coordinate_view)  # it reduces into what the buffer holds
            for view in reads:
                buffer = next((b for v, b in views.items() if v.same_as(view)), None)
                if buffer is not None and buffer not in written:
                    raise ValueError(
                        f"function {name}: iteration {it.name} reads {buffer.name}, an intermediate (used but "
                        f"not in params) that no earlier iteration writes; write it first, or pass it in params")
        written.update(store.buffer for store in it.stores)


def _axes_of(buffers, iterations) -> list[Axis]:
    out: list[Axis] = []

    def add(axis: Axis) -> None:
        for link in axis.chain():
            if link not in out:
                out.append(link)

    for it in iterations:
        for axis in it.axes:
            add(axis)
    for buffer in buffers:
        for axis in buffer.axes:
            add(axis)
    return out


def _size_vars_of(axes) -> list[tirx.Var]:
    found: list[tirx.Var] = []
    for axis in axes:
        for expr in (axis.length, axis.nnz, axis.nnz_cols):
            if expr is None:
                continue
            for var in tirx.analysis.undefined_vars(expr, []):
                if not any(var.same_as(v) for v in found):
                    found.append(var)
    return found


def _common_index_dtype(name: str, axes) -> str:
    dtypes = {axis.idtype for axis in axes}
    if len(dtypes) > 1:
        raise TypeError(f"function {name}: axes mix index dtypes {sorted(dtypes)}; use one")
    return dtypes.pop()
