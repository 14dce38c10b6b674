"""``stage_tile``: compute a consumer iteration inside its producer's outer loops, per tile (Stage I -> Stage I).

Requires: the two iterations are consecutive, the producer writes an intermediate the consumer
reads, and both iterate the same ``depth`` outer axes (in one order), which hold no binary search.
Lowering then runs, for every position of those axes (a *tile*), the rest of the producer and
then the rest of the consumer, inside one loop nest; the intermediate is only ever read where it
was written in the same tile, so TVM's buffer compaction shrinks it to one tile (the staging
buffer that the schedule keeps in registers, ``schedule/staged.py``). ``disjoint=True`` says that
distinct positions of the outermost axis write disjoint outputs (parts owning their rows), so
that loop may run in parallel; it is the caller's promise (the format's construction).

Before (Stage I, rgms over ``rtile``: tiles ``t`` of a part ``p``, slots ``s``)::

    with sparse_iteration([P, T, S, J, L, K], 'SSSRRS', name='tile'):   # the dense product
        Pt[p, t, s, k] += A[p, t, s, j] * X[j, l] * W[t, l, k]
    with sparse_iteration([P, T, S, K], 'SRSS', name='scatter'):
        Y[s, k] += Pt[p, t, s, k]

After ``stage_tile(func, 'tile', 'scatter', depth=2, disjoint=True)``, in Stage II::

    for p in grid(parts):
        with block('tile0', kinds='S', parallel_safe=True):
            for t in grid(T_indptr[p + 1] - T_indptr[p]):
                with block('tile1', kinds='R'):                     # staged_tile
                    for s, j, l, k in grid(16, 1, f_in, f_out):
                        with block('tile1_product', kinds='SRRS'):
                            with init(): Pt[...] = 0
                            Pt[...] += A[...] * X[...] * W[...]
                    for s, k in grid(16, f_out):
                        with block('scatter1', kinds='SS'):
                            Y[S_indices[...], k] += Pt[...]
"""

from __future__ import annotations

from ..ir import SparseFunction


def stage_tile(func: SparseFunction, producer: str, consumer: str, *, depth: int, disjoint: bool = False
               ) -> SparseFunction:
    """A copy of ``func`` whose ``consumer`` runs inside ``producer``'s outer ``depth`` loops.

    Parameters
    ----------
    func : SparseFunction
        Holds both iterations, ``consumer`` right after ``producer``.
    producer, consumer : str
        Iteration names; the consumer reads an intermediate the producer writes.
    depth : int
        The outer axes they share (>= 1): the loops around one tile.
    disjoint : bool
        Distinct positions of the outermost shared axis write disjoint outputs (it may run in parallel).

    Returns
    -------
    SparseFunction
        ``func`` with the pair recorded (``func.tiles``); ``lower_sparse_iter`` builds the shared nest.
    """
    if not isinstance(func, SparseFunction):
        raise TypeError(f"stage_tile takes a SparseFunction, got {type(func).__name__}")
    by_name = {it.name: it for it in func.iterations}
    for name in (producer, consumer):
        if name not in by_name:
            raise ValueError(f"function {func.name} has no iteration named {name!r}")
    order = [it.name for it in func.iterations]
    if order.index(consumer) != order.index(producer) + 1:
        raise ValueError(f"stage_tile: {consumer!r} must come right after {producer!r}, got the order {order}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"stage_tile: depth must be an int >= 1, got {depth!r}")
    first, second = by_name[producer], by_name[consumer]
    if len(first.groups) <= depth or len(second.groups) <= depth:
        raise ValueError(f"stage_tile: both iterations need more than {depth} loops")
    if list(first.groups[:depth]) != list(second.groups[:depth]):
        raise ValueError(f"stage_tile: {producer!r} and {consumer!r} must share their {depth} outer axes, got "
                         f"{first.groups[:depth]} and {second.groups[:depth]}")
    written = {store.buffer for store in first.stores}
    if not any(buffer in written for buffer in func.intermediates if buffer in second.buffers):
        raise ValueError(f"stage_tile: {consumer!r} reads no intermediate that {producer!r} writes")
    if any(name in (producer, consumer) for group, _ in func.fused_groups for name in group):
        raise ValueError("stage_tile: an iteration of a horizontally fused group cannot be staged")
    return SparseFunction(func.name, func.iterations, func.buffers, func.fused_groups,
                          (*func.tiles, (producer, consumer, depth, disjoint)))
