"""Stage II: loops over *positions*, one nested block per variable axis.

Produced by ``lower_sparse_iter`` and consumed by ``lower_sparse_buffer``.
Sparse buffers are still indexed per axis, but by positions: ``A[i, j]`` means
the j-th stored entry of row i. Reads through an axis the buffer does not own
go through a hoisted, memoised :class:`Search`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import tirx

from ..ir.axis import Axis
from ..ir.buffer import SparseBuffer
from ..ir.printer import format_update

FIND = "find"  # index of ``key`` in the sorted array[lo:hi], or -1 when absent
UPPER_BOUND = "upper_bound"  # first index in [lo, hi) whose entry is > key, else hi


@dataclass(eq=False)
class PositionLoop:
    """A loop over the positions of one axis, or of a fused group of axes."""

    var: tirx.Var
    extent: tirx.Expr
    kind: str  # "S" or "R"
    axes: tuple[Axis, ...]


@dataclass(eq=False)
class Search:
    """``result = <mode>(array[lo:hi], key)``, computed once where all its inputs are known."""

    result: tirx.Var
    mode: str
    array: tirx.Var  # a metadata buffer
    lo: tirx.Expr
    hi: tirx.Expr
    key: tirx.Expr


@dataclass(eq=False)
class Store:
    """``buffer[positions] = value``, or a reduction into it (``reducer`` "sum", "max" or "min"),
    where every ``predicate`` holds; loads in ``value`` use position views. ``atomic``
    reductions may collide across parallel instances (atomic on CUDA)."""

    buffer: SparseBuffer
    positions: tuple
    value: tirx.Expr
    reducer: str | None = None
    predicate: tuple = ()
    atomic: bool = False

    @property
    def accumulate(self) -> bool:
        return self.reducer is not None


@dataclass(eq=False)
class Block:
    """Loops, then (inside them) searches, an optional init, and the body."""

    name: str
    loops: list[PositionLoop]
    searches: list[Search] = field(default_factory=list)
    init: list[Store] = field(default_factory=list)
    body: list = field(default_factory=list)  # Blocks and Stores
    parallel_safe: bool = False  # distinct outer-loop iterations write disjoint outputs
    annotations: dict = field(default_factory=dict)  # block attributes for the schedule (STAGED_TILE_ATTR)
    local_buffers: list = field(default_factory=list)  # intermediates allocated here, in local scope


@dataclass(eq=False)
class Fill:
    """Set every element of ``buffer`` to ``value`` (before an iteration that cannot init in place)."""

    buffer: SparseBuffer
    value: tirx.Expr


@dataclass(eq=False)
class FusedGroup:
    """Several iterations run by one loop over their concatenated outer loops (one CUDA launch).

    Member ``k`` runs where ``offsets[k] <= var < offsets[k] + extents[k]``, with its outer
    loop's position bound to ``var - offsets[k]``; ``members[k]`` is its top block without
    that outer loop.
    """

    name: str
    var: tirx.Var
    outer_vars: list  # each member's outer-loop position var
    offsets: list
    extents: list
    members: list  # Blocks
    parallel_safe: bool = False  # members write disjoint outputs

    @property
    def extent(self):
        return self.offsets[-1] + self.extents[-1]


@dataclass(eq=False)
class Stage2Function:
    name: str
    buffers: list[SparseBuffer]
    axes: list[Axis]
    size_vars: list[tirx.Var]
    idtype: str
    body: list  # Fill and top-level Blocks, in execution order
    intermediates: list = field(default_factory=list)  # buffers the kernel allocates
    coordinates: dict = field(default_factory=dict)  # integer buffer -> axes it gives coordinates of

    def __str__(self) -> str:
        return format_stage2(self)


def format_stage2(func: Stage2Function) -> str:
    """TVMScript-like text of a Stage II function."""
    params = [f"{b.name}: {b.dtype}[{', '.join(a.name for a in b.axes)}]" for b in func.buffers]
    params += [f"{m.name}: {m.dtype}[{', '.join(map(str, m.shape))}]" for a in func.axes for m in a.metadata()]
    lines = [f"# Stage II: positions (index dtype {func.idtype})", f"def {func.name}({', '.join(params)}):"]
    local = {b for node in func.body if isinstance(node, Block) for b in _local_buffers(node)}
    lines += [f"    {b.name} = alloc({b.dtype}[{', '.join(a.name for a in b.axes)}])  # intermediate"
              for b in func.intermediates if b not in local]
    for node in func.body:
        _format_node(node, 1, lines)
    return "\n".join(lines)


def _local_buffers(block: Block) -> list:
    """The intermediates allocated in ``block`` or a block inside it."""
    found = list(block.local_buffers)
    for child in block.body:
        if isinstance(child, Block):
            found += _local_buffers(child)
    return found


def _format_node(node, depth: int, lines: list) -> None:
    pad = "    " * depth
    if isinstance(node, Fill):
        lines.append(f"{pad}{node.buffer.name}[...] = {node.value}")
    elif isinstance(node, Store):
        target = f"{node.buffer.name}[{', '.join(map(str, node.positions))}]"
        guard = f"if {' and '.join(map(str, node.predicate))}: " if node.predicate else ""
        lines.append(f"{pad}{guard}{target} {format_update(node.reducer, target, node.value, node.atomic)}")
    elif isinstance(node, FusedGroup):
        lines.append(f"{pad}for {node.var.name} in grid({node.extent}):  # horizontally fused")
        for outer, offset, extent, member in zip(node.outer_vars, node.offsets, node.extents, node.members):
            lines.append(f"{pad}    if {offset} <= {node.var.name} < {offset + extent}:  "
                         f"# {outer.name} = {node.var.name} - {offset}")
            _format_node(member, depth + 2, lines)
    else:
        names = ", ".join(loop.var.name for loop in node.loops)
        extents = ", ".join(str(loop.extent) for loop in node.loops)
        kinds = "".join(loop.kind for loop in node.loops)
        if node.loops:
            lines.append(f"{pad}for {names} in grid({extents}):")
            pad, depth = pad + "    ", depth + 1
        safe = ", parallel_safe=True" if node.parallel_safe else ""
        safe += "".join(f", {key.split('.')[-1]}" for key in node.annotations)
        safe += "".join(f", local={b.name}" for b in node.local_buffers)
        lines.append(f"{pad}with block({node.name!r}, kinds={kinds!r}{safe}):")
        inner = "    " * (depth + 1)
        for search in node.searches:
            lines.append(
                f"{inner}{search.result.name} = {search.mode}({search.array.name}, "
                f"{search.lo}, {search.hi}, key={search.key})"
            )
        for store in node.init:
            lines.append(f"{inner}with init(): {store.buffer.name}[{', '.join(map(str, store.positions))}] = {store.value}")
        for child in node.body:
            _format_node(child, depth + 1, lines)
