"""``format_decompose``: split one sparse iteration into one iteration per sub-format (Stage I -> Stage I).

Each :class:`FormatRewriteRule` replaces a run of the iteration's loops (the
*source axes*, e.g. ``I, J`` of CSR) by the sub-format's loops, replaces every
sparse buffer laid out over the source axes by the sub-format's buffer, and maps
each source coordinate to an expression of the sub-format's coordinates (the
index map; for a BSR block ``i = io * b + ii``). The body is rewritten, not
re-traced, so the composed result equals the original computation.

Outputs that several sub-iterations update are initialised once, by a fill
iteration in front (or by the first sub-iteration when its rows are the output's
own row axis), and the sub-iterations accumulate.

Before::

    with sparse_iteration([I, J, K], 'SRS') as (i, j, k):
        C[i, k] += A[i, j] * B[j, k]

After ``format_decompose(func, [ell_rule, remainder_rule])``::

    with sparse_iteration([I, J_ell, K], 'SRS', name='spmm_ell') as (i, j_ell, k):
        C[i, k] += A_ell[i, j_ell] * B[j_ell, k]
    with sparse_iteration([I, J_rem, K], 'SRS', name='spmm_rem', init=None) as (i, j_rem, k):
        C[i, k] += A_rem[i, j_rem] * B[j_rem, k]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tvm_ffi
from tvm import tirx
from tvm.ir.expr import TensorLoad

from ..ir import FusedAxis, SparseBuffer, SparseFunction, SparseIteration, SparseStore, sparse_iteration
from ..ir.iteration import OUTPUT, WRITTEN, reducer_identity
from ..ir.padding import guard_padding, is_floating
from .select_iteration import select_iteration


@dataclass(frozen=True, eq=False)
class FormatRewriteRule:
    """One sub-format of a decomposition.

    ``coordinates`` receives ``{new axis: its iterator}`` and returns ``{source axis:
    coordinate expression}``. ``atomic``: its accumulations may collide on CUDA.
    ``covers_output``: its row loop is the source row axis itself, so it may initialise
    outputs the other sub-formats accumulate into. ``owns_rows``: it alone writes the rows
    it lists; when every rule owns its rows (together covering each row once), each
    initialises its own rows and no fill is needed. ``padded``: its value buffers have padding
    slots (``ir.padding``), so a reduction that reads one skips them.
    """

    name: str
    source_axes: tuple
    axes: tuple
    kinds: str
    buffers: dict
    coordinates: Callable
    atomic: bool = False
    covers_output: bool = False
    owns_rows: bool = False
    padded: bool = False

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"rule name must be an identifier, got {self.name!r}")
        flat = _flat(self.axes)
        if len(self.kinds) != len(flat) or any(k not in "SR" for k in self.kinds):
            raise ValueError(f"rule {self.name}: kinds {self.kinds!r} must give 'S'/'R' for each of {len(flat)} axes")
        for source, target in self.buffers.items():
            if not isinstance(source, SparseBuffer) or not isinstance(target, SparseBuffer):
                raise TypeError(f"rule {self.name}: buffers must map SparseBuffer to SparseBuffer")
            if any(axis not in flat for axis in target.axes):
                raise ValueError(f"rule {self.name}: {target.name} must be laid out over the rule's axes")


def format_decompose(func: SparseFunction, rules, *, iteration: str | None = None) -> SparseFunction:
    """A copy of ``func`` whose iteration runs once per rule (plus fills for shared outputs)."""
    index, it = select_iteration(func, iteration)
    rules = list(rules)
    if not rules:
        raise ValueError("format_decompose needs at least one rule")
    for rule in rules:
        if not isinstance(rule, FormatRewriteRule):
            raise TypeError(f"format_decompose takes FormatRewriteRules, got {type(rule).__name__}")
        _check_source_run(it, rule)
    replaced = {buffer for rule in rules for buffer in rule.buffers}
    shared = [s.buffer for s in it.stores if s.accumulate and s.buffer not in replaced]
    shared = list(dict.fromkeys(shared))
    if shared and len(shared) != len({s.buffer for s in it.stores if s.accumulate}):
        raise NotImplementedError(f"iteration {it.name}: outputs mix sub-format buffers and shared buffers")
    partition = all(rule.owns_rows for rule in rules)
    fills = []
    if shared and it.init is not None and not rules[0].covers_output and not partition:
        starts = {store.buffer: it.init_of(store) for store in it.stores if store.buffer in shared}
        fills = [_fill_iteration(buffer, starts[buffer], f"{it.name}_{buffer.name}_init") for buffer in shared]
    pieces = []
    for position, rule in enumerate(rules):
        init = it.init if (not shared or partition or (position == 0 and not fills)) else None
        scope = WRITTEN if shared and partition else OUTPUT
        pieces.append(_rewrite_iteration(it, rule, init, scope))
    iterations = list(func.iterations[:index]) + fills + pieces + list(func.iterations[index + 1:])
    params = []
    for buffer in func.buffers:
        params.extend([r.buffers[buffer] for r in rules if buffer in r.buffers] if buffer in replaced else [buffer])
    return SparseFunction(func.name, iterations, params=list(dict.fromkeys(params)), fused_groups=func.fused_groups)


def _flat(groups) -> list:
    return [a for g in groups for a in (g.axes if isinstance(g, FusedAxis) else (g,))]


def _check_source_run(it: SparseIteration, rule: FormatRewriteRule) -> None:
    groups = list(it.groups)
    source = list(rule.source_axes)
    if not source or source[0] not in groups:
        raise ValueError(f"rule {rule.name}: source axes {[a.name for a in source]} are not loops of {it.name}")
    start = groups.index(source[0])
    if groups[start:start + len(source)] != source:
        raise ValueError(f"rule {rule.name}: source axes {[a.name for a in source]} must be consecutive loops "
                         f"of {it.name}, which are {[g.name for g in groups]}")


def _rewrite_iteration(it: SparseIteration, rule: FormatRewriteRule, init, init_scope: str) -> SparseIteration:
    groups = list(it.groups)
    start = groups.index(rule.source_axes[0])
    end = start + len(rule.source_axes)
    new_groups = groups[:start] + list(rule.axes) + groups[end:]
    new_axes = _flat(rule.axes)
    new_vars = {axis: tirx.Var(axis.name.lower(), axis.idtype) for axis in new_axes}
    coordinates = rule.coordinates(dict(new_vars))
    substitute = {it.var_of(axis): coordinates[axis] for axis in rule.source_axes}
    kinds = it.kinds[:_flat_len(groups[:start])] + rule.kinds + it.kinds[_flat_len(groups[:end]):]
    iter_vars = []
    for axis in _flat(new_groups):
        iter_vars.append(new_vars[axis] if axis in new_vars else it.var_of(axis))
    by_view = {buffer.coordinate_view: buffer for buffer in it.buffers}
    expected = [it.var_of(axis) for axis in rule.source_axes]

    def replacement_access(buffer, indices):
        if len(indices) != len(expected) or not all(i.same_as(v) for i, v in zip(indices, expected)):
            raise NotImplementedError(
                f"rule {rule.name}: {buffer.name} must be accessed as {buffer.name}"
                f"[{', '.join(v.name for v in expected)}] to be rewritten into a sub-format"
            )
        target = rule.buffers[buffer]
        return target, [new_vars[axis] for axis in target.axes]

    def rewrite(expr):
        def on_load(load, mutator):
            buffer = by_view.get(load.source)
            if buffer in rule.buffers:
                target, indices = replacement_access(buffer, list(load.indices))
                return tirx.BufferLoad(target.coordinate_view, indices)
            return tirx.BufferLoad(load.source, [mutator.mutate(i) for i in load.indices])

        def on_var(var, _mutator):
            return substitute.get(var, var)

        return tvm_ffi.structural_mutate(expr, [(TensorLoad, on_load), (tirx.Var, on_var)])

    stores = []
    for store in it.stores:
        if store.buffer in rule.buffers:
            target, indices = replacement_access(store.buffer, list(store.indices))
        else:
            target, indices = store.buffer, [rewrite(i) for i in store.indices]
        value = rewrite(store.value)
        if rule.padded and store.accumulate and store.buffer not in rule.buffers:
            value = _skip_padding(value, store, rule)
        stores.append(SparseStore(target, tuple(indices), value, store.reducer))
    buffers = [rule.buffers.get(b, b) for b in it.buffers]
    return SparseIteration(f"{it.name}_{rule.name}", new_groups, kinds, iter_vars, stores, init,
                           list(dict.fromkeys(buffers)),
                           atomic=it.atomic or (rule.atomic and bool(shared_outputs(it, rule))),
                           init_scope=init_scope, accum_dtype=it.accum_dtype)


def _skip_padding(value, store, rule: FormatRewriteRule):
    """``value`` guarded to contribute the reducer's identity for a padding slot of the first padded
    floating value buffer it reads (``ir.padding``); unchanged when it reads none."""
    views = {b.coordinate_view: b for b in rule.buffers.values() if is_floating(b.dtype)}
    slots = []

    def on_load(load):
        if load.source in views and not slots:
            slots.append(load)

    tvm_ffi.structural_walk(value, [(TensorLoad, on_load)])
    if not slots:
        return value
    return guard_padding(value, slots[0], reducer_identity(store.reducer, views[slots[0].source].dtype))


def shared_outputs(it: SparseIteration, rule: FormatRewriteRule) -> list:
    """Outputs the rule's sub-iteration writes that it does not own (other sub-formats write them too)."""
    return [s.buffer for s in it.stores if s.accumulate and s.buffer not in rule.buffers]


def _flat_len(groups) -> int:
    return len(_flat(groups))


def _fill_iteration(buffer: SparseBuffer, value, name: str) -> SparseIteration:
    """``buffer[...] = value`` over the buffer's own axes."""

    @sparse_iteration(list(buffer.axes), "S" * len(buffer.axes), name=name)
    def fill(*coordinates):
        buffer[coordinates] = tirx.const(value, buffer.dtype)

    return fill

