"""``horizontal_fuse``: run several sparse iterations as one loop, one launch on CUDA (Stage I -> Stage I).

Requires: the iterations are consecutive, and each one's outermost loop is a
spatial root axis (its extent depends on no other loop). Lowering concatenates
those outer loops into one loop and guards each member by its range: CUDA
blocks of all members come from one launch. On the CPU the fused loop is one
parallel region, which is only race-free when the members write disjoint
outputs: say so with ``disjoint=True`` (e.g. hyb buckets with one column part),
otherwise the fused loop runs serially.

Before::

    with sparse_iteration([R0, J0, K], 'SRS', name='b0'): ...
    with sparse_iteration([R1, J1, K], 'SRS', name='b1'): ...

After ``horizontal_fuse(func, ['b0', 'b1'])``, in Stage II::

    for g in grid(rows0 + rows1):  # horizontally fused
        if 0 <= g < rows0: ...        # b0 with r0 = g
        if rows0 <= g < rows0 + rows1: ...  # b1 with r1 = g - rows0
"""

from __future__ import annotations

from ..ir import Axis, SparseFunction


def horizontal_fuse(func: SparseFunction, iterations=None, *, disjoint: bool = False) -> SparseFunction:
    """A copy of ``func`` whose named iterations (default: all) run as one fused loop."""
    if not isinstance(func, SparseFunction):
        raise TypeError(f"horizontal_fuse takes a SparseFunction, got {type(func).__name__}")
    names = [it.name for it in func.iterations] if iterations is None else list(iterations)
    by_name = {it.name: it for it in func.iterations}
    if len(names) < 2:
        raise ValueError("horizontal_fuse needs at least two iterations")
    for name in names:
        if name not in by_name:
            raise ValueError(f"function {func.name} has no iteration named {name!r}")
        outer = by_name[name].groups[0]
        if not isinstance(outer, Axis) or outer.parent is not None or by_name[name].kinds[0] != "S":
            raise ValueError(f"iteration {name}: its outermost loop must be a spatial root axis to be fused")
    groups = tuple(func.fused_groups) + ((tuple(names), disjoint),)
    return SparseFunction(func.name, func.iterations, func.buffers, groups, func.tiles)
