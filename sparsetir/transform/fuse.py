"""``sparse_fuse``: iterate several consecutive axes with one loop (Stage I -> Stage I).

Requires: the axes are consecutive loops of the iteration, in loop order, with
one kind; either a parent -> child chain starting at a root axis (``I, J`` of
CSR: one loop over the non-zeros), or only dense_fixed axes.

Before::

    with sparse_iteration([I, J, K], 'SSR') as (i, j, k): ...

After ``sparse_fuse(func, [I, J])``::

    with sparse_iteration([fuse(I, J), K], 'SSR') as (i, j, k): ...

Lowering then recovers ``i`` from the fused position with a search on ``J_indptr``.
"""

from __future__ import annotations

from ..ir import FusedAxis, SparseFunction, fuse
from ..ir.axis import DENSE_FIXED
from .select_iteration import replace_iteration, select_iteration


def sparse_fuse(func: SparseFunction, axes, *, iteration: str | None = None) -> SparseFunction:
    """A copy of ``func`` with ``axes`` fused into one loop."""
    index, it = select_iteration(func, iteration)
    axes = list(axes)
    group = fuse(*axes)
    groups = list(it.groups)
    if any(isinstance(g, FusedAxis) and any(a in g.axes for a in axes) for g in groups):
        raise ValueError(f"sparse_fuse: some of {[a.name for a in axes]} are already fused")
    missing = [a.name for a in axes if a not in groups]
    if missing:
        raise ValueError(f"sparse_fuse: {missing} are not loops of iteration {it.name}")
    start = groups.index(axes[0])
    if groups[start:start + len(axes)] != axes:
        raise ValueError(
            f"sparse_fuse: fused axes {[a.name for a in axes]} must be contiguous loops in order; "
            f"the loops are {[g.name for g in groups]}"
        )
    if len({it.kind_of(a) for a in axes}) != 1:
        raise ValueError(f"sparse_fuse: axes {[a.name for a in axes]} mix 'S' and 'R' kinds")
    chain = axes[0].parent is None and all(c.parent is p for p, c in zip(axes, axes[1:]))
    if not chain and not all(a.kind == DENSE_FIXED for a in axes):
        raise ValueError(
            f"sparse_fuse: {[a.name for a in axes]} must be a parent->child chain from a root axis, "
            f"or only dense_fixed axes"
        )
    new_groups = groups[:start] + [group] + groups[start + len(axes):]
    return replace_iteration(func, index, it.replace(groups=new_groups))


__all__ = ["sparse_fuse"]
