"""``sparse_reorder``: permute the loops of a sparse iteration (Stage I -> Stage I).

Requires: ``order`` lists every loop of the iteration once (fused groups as the
FusedAxis), and every axis still comes after its parent.

Before::

    with sparse_iteration([I, J, K], 'SRS') as (i, j, k): ...

After ``sparse_reorder(func, [I, K, J])``::

    with sparse_iteration([I, K, J], 'SSR') as (i, k, j): ...
"""

from __future__ import annotations

from ..ir import Axis, FusedAxis, SparseFunction
from .select_iteration import replace_iteration, select_iteration


def sparse_reorder(func: SparseFunction, order, *, iteration: str | None = None) -> SparseFunction:
    """A copy of ``func`` whose iteration loops run in ``order``."""
    index, it = select_iteration(func, iteration)
    order = list(order)
    for group in order:
        if not isinstance(group, (Axis, FusedAxis)):
            raise TypeError(f"sparse_reorder takes axes, got {type(group).__name__}")
    current = list(it.groups)
    if len(order) != len(current) or any(sum(g is o for o in order) != 1 for g in current):
        raise ValueError(
            f"order {[g.name for g in order]} must list each loop of {it.name} "
            f"{[g.name for g in current]} exactly once"
        )
    seen: set = set()
    for group in order:
        for axis in group.axes if isinstance(group, FusedAxis) else (group,):
            if axis.parent is not None and axis.parent not in seen and axis.parent in it.axes:
                raise ValueError(f"sparse_reorder: axis {axis.name} would come before its parent {axis.parent.name}")
            seen.add(axis)
    return replace_iteration(func, index, it.replace(groups=order))
