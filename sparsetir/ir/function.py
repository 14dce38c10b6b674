"""A Stage I function: sparse iterations run in order over shared buffers and axes."""

from __future__ import annotations

from tvm import tirx

from .axis import Axis
from .buffer import SparseBuffer
from .iteration import SparseIteration


class SparseFunction:
    """``name``: the kernel symbol. ``params``: buffer order of the compiled signature
    (default: first use). Metadata arrays of the axes and symbolic sizes follow the buffers.
    ``fused_groups``: ``(iteration names, disjoint)`` pairs run as one loop (``horizontal_fuse``)."""

    def __init__(self, name: str, iterations, params=None, fused_groups=()):
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
        missing = [b.name for b in used if b not in params]
        if missing:
            raise ValueError(f"function {name}: buffers {missing} are used but not in params")
        self.name = name
        self.iterations = iterations
        self.buffers = params
        self.axes = _axes_of(params, iterations)
        self.size_vars = _size_vars_of(self.axes)
        self.idtype = _common_index_dtype(name, self.axes)
        self.fused_groups = tuple((tuple(names), bool(disjoint)) for names, disjoint in fused_groups)
        self._check_names()
        self._check_fused_groups()

    def with_iterations(self, iterations) -> SparseFunction:
        """A copy with new iterations (used by transforms); buffers and fused groups are kept."""
        return SparseFunction(self.name, iterations, self.buffers, self.fused_groups)

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
