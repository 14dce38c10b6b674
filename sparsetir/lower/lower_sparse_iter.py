"""``lower_sparse_iter``: Stage I (coordinates) -> Stage II (loops over positions).

Requires: every iterated child axis comes after its parent (``sparse_reorder``
checks this); a fused group is a parent->child chain starting at a root axis,
or a run of dense root axes.

What it does, per sparse iteration:

* one loop per axis (or fused group) over *positions*; a new nested block starts
  at every axis whose extent depends on outer positions (variable axes) and after
  every loop that owns a hoisted search;
* coordinates become positions: ``B[j, k]`` with ``j`` iterating the sparse axis
  ``J`` and ``B`` dense over ``J_`` becomes ``B[J_indices[J_indptr[i] + j], k]``;
* a sparse buffer read through an axis it does not own gets a binary search in
  the row (hoisted to the loop where its inputs are known, memoised by its
  inputs), and the read yields 0 where the coordinate is not stored;
* fused axes recover their outer positions with an upper-bound search on indptr.

Before (Stage I)::

    with sparse_iteration([I, J, K], 'SRS') as (i, j, k):
        C[i, k] += A[i, j] * B[j, k]

After (Stage II)::

    for i in grid(m):
        with block('spmm0', kinds='S'):
            for j, k in grid(J_indptr[i + 1] - J_indptr[i], 64):
                with block('spmm1', kinds='RS'):
                    with init(): C[i, k] = 0
                    C[i, k] += A[i, j] * B[J_indices[J_indptr[i] + j], k]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import sym, tirx
from tvm.ir.expr import TensorLoad

from ..ir.axis import DENSE_FIXED, Axis, FusedAxis, dense_fixed
from ..ir.buffer import SparseBuffer
from ..ir.function import SparseFunction
from ..ir.iteration import WRITTEN, SparseIteration
from . import offsets
from .stage2 import FIND, UPPER_BOUND, Block, Fill, FusedGroup, PositionLoop, Search, Stage2Function, Store


def lower_sparse_iter(func: SparseFunction) -> Stage2Function:
    """Lower every sparse iteration of ``func`` to position loops (Stage II)."""
    if not isinstance(func, SparseFunction):
        raise TypeError(f"lower_sparse_iter takes a SparseFunction, got {type(func).__name__}")
    names = [it.name for it in func.iterations]
    if len(set(names)) != len(names):
        raise ValueError(f"function {func.name}: iteration names must be unique, got {names}")
    lowerings = {it.name: _IterationLowering(it, func.idtype) for it in func.iterations}
    lowered = {name: lowering.lower() for name, lowering in lowerings.items()}
    coordinates: dict = {}
    for lowering in lowerings.values():
        for buffer, axes in lowering.coordinates.items():
            coordinates.setdefault(buffer, [])
            coordinates[buffer] += [axis for axis in axes if axis not in coordinates[buffer]]
    groups = {names[0]: (names, disjoint) for names, disjoint in func.fused_groups}
    body, done = [], set()
    intermediates = list(func.intermediates)
    tiles = {producer: (consumer, depth, disjoint) for producer, consumer, depth, disjoint in func.tiles}
    by_name = {it.name: it for it in func.iterations}
    for it in func.iterations:
        if it.name in done:
            continue
        if it.name in tiles:
            consumer, depth, disjoint = tiles[it.name]
            producer_nodes, consumer_nodes = lowered[it.name], lowered[consumer]
            body.extend(producer_nodes[:-1] + consumer_nodes[:-1])  # fills run first
            others = [b for other in func.iterations if other.name not in (it.name, consumer) for b in other.buffers]
            local = [b for b in func.intermediates
                     if b in it.buffers and b in by_name[consumer].buffers and b not in others]
            tile_buffers = {b: _tile_buffer(b, depth) for b in local}
            intermediates = [tile_buffers.get(b, b) for b in intermediates]
            private = all(store.buffer in tile_buffers for store in it.stores)  # the producer writes only tiles
            body.append(_stage_tile(producer_nodes[-1], consumer_nodes[-1], depth, disjoint, tile_buffers, private))
            done |= {it.name, consumer}
        elif it.name in groups:
            names, disjoint = groups[it.name]
            members = [lowered[name] for name in names]
            body.extend(node for nodes in members for node in nodes[:-1])  # fills run first
            body.append(_fuse(f"{it.name}_fused", [nodes[-1] for nodes in members], disjoint))
            done |= set(names)
        else:
            body.extend(lowered[it.name])
    return Stage2Function(func.name, func.buffers, func.axes, func.size_vars, func.idtype, body, intermediates,
                          coordinates)


def _fuse(name: str, tops: list, disjoint: bool) -> FusedGroup:
    """One loop over the members' outer loops; each member keeps the rest of its nest."""
    offsets, extents, members, outer_vars = [], [], [], []
    offset = 0
    for top in tops:
        outer = top.loops[0]
        offsets.append(offset)
        extents.append(outer.extent)
        outer_vars.append(outer.var)
        offset = offset + outer.extent
        members.append(Block(top.name, top.loops[1:], top.searches, top.init, top.body, top.parallel_safe))
    safe = disjoint and all(top.parallel_safe for top in tops)
    var = tirx.Var("g", str(tops[0].loops[0].var.ty))
    return FusedGroup(name, var, outer_vars, offsets, extents, members, parallel_safe=safe)


#: Block annotation: the block whose loops are the shared outer loops of a staged tile
#: (``transform.stage_tile``); its children are the producer's and the consumer's rest.
STAGED_TILE_ATTR = "sparsetir.staged_tile"


def _shared_chain(top: Block, depth: int, name: str) -> tuple[list, Block]:
    """The blocks holding the first ``depth`` loops of a nest (the last one cut after them) and the
    rest of the nest, one block."""
    chain, block, count = [], top, 0
    while True:
        if block.searches:
            raise ValueError(f"stage_tile: {name} searches inside its shared loops; they cannot be staged")
        take = min(depth - count, len(block.loops))
        count += take
        if count == depth:
            suffix = "_product" if name == "producer" else "_rest"
            head = Block(block.name, block.loops[:take], parallel_safe=block.parallel_safe)
            chain.append(head)
            if take < len(block.loops):
                return chain, Block(f"{block.name}{suffix}", block.loops[take:], [], block.init, block.body)
            # the shared loops are this whole block: the rest is the one block nested in it
            inner = [child for child in block.body if isinstance(child, Block)]
            if block.init or len(inner) != 1 or len(block.body) != 1:
                raise ValueError(f"stage_tile: the {name} has no loops of its own inside the shared ones")
            rest = inner[0]
            return chain, Block(f"{rest.name}{suffix}", rest.loops, list(rest.searches), rest.init, rest.body)
        if block.init:
            raise ValueError(f"stage_tile: the {name} initialises inside its shared loops")
        chain.append(block)
        inner = [child for child in block.body if isinstance(child, Block)]
        if len(inner) != 1 or len(block.body) != 1:
            raise ValueError(f"stage_tile: the {name}'s shared loops must hold one nested block")
        block = inner[0]


def _tile_buffer(buffer, depth: int):
    """``buffer`` without its first ``depth`` axes (one tile's worth), its other axes dense: a sparse
    fixed axis becomes a dense one of its width."""
    axes = []
    for axis in buffer.axes[depth:]:
        if axis.is_variable:
            raise ValueError(f"stage_tile: the tile buffer {buffer.name} has a variable axis {axis.name} inside a tile")
        axes.append(axis if not axis.is_sparse else dense_fixed(f"{axis.name}_tile", axis.nnz_cols, str(axis.length.ty)))
    return SparseBuffer(buffer.name, tuple(axes), buffer.dtype)


def _substitute_node(node, mapping: dict, buffers: dict, depth: int):
    """A copy of a Stage II node with loop variables replaced (``mapping``: var -> var) and accesses of
    the tile buffers (``buffers``: old -> tile buffer) rid of their first ``depth`` positions."""
    views = {old.position_view: new for old, new in buffers.items()}

    def on_load(load, mutator):
        new = views.get(load.source)
        load = mutator.default_mutate(load)
        return load if new is None else tirx.BufferLoad(new.position_view, list(load.indices)[depth:])

    def sub(expr):
        if expr is None or isinstance(expr, int):
            return expr
        return tvm_ffi.structural_mutate(expr, [(TensorLoad, on_load),
                                                (tirx.Var, lambda var, _m: mapping.get(var, var))])

    if isinstance(node, Store):
        positions = tuple(sub(p) for p in node.positions)
        buffer = buffers.get(node.buffer, node.buffer)
        return Store(buffer, positions[depth:] if buffer is not node.buffer else positions, sub(node.value),
                     node.reducer, tuple(sub(p) for p in node.predicate), node.atomic)
    loops = [PositionLoop(loop.var, sub(loop.extent), loop.kind, loop.axes) for loop in node.loops]
    return Block(node.name, loops, list(node.searches), [_substitute_node(s, mapping, buffers, depth) for s in node.init],
                 [_substitute_node(child, mapping, buffers, depth) for child in node.body], node.parallel_safe,
                 dict(node.annotations))


def _stage_tile(producer: Block, consumer: Block, depth: int, disjoint: bool, local: dict, private: bool) -> Block:
    """The producer's nest with the consumer's rest run after the producer's rest, inside the shared loops.

    The outer loop may run in parallel where the caller promised ``disjoint`` outputs, or where the producer
    writes only the tile (``private``) and the lowering proved the consumer's outer iterations write apart."""
    head, producer_rest = _shared_chain(producer, depth, "producer")
    consumer_head, consumer_rest = _shared_chain(consumer, depth, "consumer")
    shared = [loop for block in head for loop in block.loops]
    consumer_loops = [loop for block in consumer_head for loop in block.loops]
    if [loop.axes for loop in shared] != [loop.axes for loop in consumer_loops]:
        raise ValueError("stage_tile: the producer and the consumer iterate different outer loops")
    mapping = {theirs.var: ours.var for ours, theirs in zip(shared, consumer_loops)}
    for ours, theirs in zip(shared, consumer_loops):
        if theirs.kind == "R":
            ours.kind = "R"  # a reduction for the consumer: distinct tiles may write the same outputs
    for outer, inner in zip(head, head[1:]):
        outer.body = [inner]
    head[-1].body = [_substitute_node(producer_rest, {}, local, depth),
                     _substitute_node(consumer_rest, mapping, local, depth)]
    head[-1].annotations = {STAGED_TILE_ATTR: 1}
    head[-1].local_buffers = list(local.values())  # only this tile reads what it wrote: one tile's worth
    proven = private and consumer.parallel_safe
    head[0].parallel_safe = (bool(disjoint) or proven) and head[0].loops[0].kind == "S"
    return head[0]


class _IterationLowering:
    def __init__(self, it: SparseIteration, idtype: str):
        self.it = it
        self.idtype = idtype
        self.loops: list[PositionLoop] = []
        self.position: dict[Axis, tirx.Expr] = {}
        self.offset: dict[Axis, tirx.Expr] = {}
        self.coord: dict[Axis, tirx.Expr] = {}
        self.level: dict[tirx.Var, int] = {}  # position and search-result vars -> loop index
        self.searches: list[Search] = []
        self.search_memo: dict[tuple, Search] = {}
        self.coordinates: dict = {}  # integer buffer -> the axes its values index (checked per call)

    # -- loops -------------------------------------------------------------------------
    def lower(self) -> list:
        for index, group in enumerate(self.it.groups):
            if isinstance(group, FusedAxis):
                self._enter_fused(index, group)
            else:
                self._enter_axis(index, group)
        stores = [self._lower_store(store) for store in self.it.stores]
        return self._build_blocks(stores)

    def _new_loop(self, index: int, name: str, extent, axes) -> tirx.Var:
        var = tirx.Var(name, self.idtype)
        self.loops.append(PositionLoop(var, extent, self.it.kind_of(axes[0]), tuple(axes)))
        self.level[var] = index
        return var

    def _enter_axis(self, index: int, axis: Axis) -> None:
        parent_offset = self.offset.get(axis.parent)
        extent = offsets.position_extent(axis, parent_offset)
        var = self._new_loop(index, self.it.var_of(axis).name, extent, [axis])
        self._place(axis, var, offsets.chain_offset(axis, parent_offset, var))

    def _place(self, axis: Axis, position, offset) -> None:
        self.position[axis] = position
        self.offset[axis] = offset
        self.coord[axis] = offsets.coordinate(axis, offset, position)

    def _enter_fused(self, index: int, group: FusedAxis) -> None:
        axes = group.axes
        name = "".join(self.it.var_of(a).name for a in axes)
        if all(a.kind == DENSE_FIXED for a in axes):
            extent = axes[0].length
            for axis in axes[1:]:
                extent = extent * axis.length
            var = self._new_loop(index, name, extent, axes)
            rest = var
            for axis in reversed(axes):
                position = tirx.floormod(rest, axis.length)
                self._place(axis, position, position)
                rest = tirx.floordiv(rest, axis.length)
            return
        if axes[0].parent is not None or any(c.parent is not p for p, c in zip(axes, axes[1:])):
            raise NotImplementedError(
                f"iteration {self.it.name}: fused group {group} must be a parent->child chain starting at a "
                f"root axis, or only dense_fixed axes"
            )
        var = self._new_loop(index, name, axes[-1].chain_size(), axes)
        chain_offsets = {axes[-1]: var}
        for parent, child in zip(reversed(axes[:-1]), reversed(axes[1:])):
            if child.is_variable:
                bound = self._search(UPPER_BOUND, child.indptr, 0, parent.chain_size() + 1, chain_offsets[child])
                chain_offsets[parent] = bound - 1
            else:
                chain_offsets[parent] = tirx.floordiv(chain_offsets[child], child.nnz_cols)
        for axis in axes:
            offset = chain_offsets[axis]
            if axis.parent is None:
                position = offset
            else:
                position = offset - offsets.row_range(axis, chain_offsets[axis.parent])[0]
            self._place(axis, position, offset)

    # -- searches ----------------------------------------------------------------------
    def _search(self, mode: str, array, lo, hi, key) -> tirx.Var:
        lo, hi, key = (tirx.const(x, self.idtype) if isinstance(x, int) else x for x in (lo, hi, key))
        memo_key = (mode, array.name, str(lo), str(hi), str(key))
        found = self.search_memo.get(memo_key)
        if found is None:
            tag = "pos" if mode == FIND else "row"
            result = tirx.Var(f"{array.name}_{tag}{len(self.searches)}", self.idtype)
            found = Search(result, mode, array, lo, hi, key)
            self.level[result] = max(self._level_of(e) for e in (lo, hi, key))
            self.searches.append(found)
            self.search_memo[memo_key] = found
        return found.result

    def _level_of(self, expr) -> int:
        """Index of the innermost loop ``expr`` depends on (-1: none)."""
        levels = [self.level.get(v, -1) for v in tirx.analysis.undefined_vars(expr, [])]
        return max(levels, default=-1)

    # -- coordinates -> positions ------------------------------------------------------
    def _rewrite(self, expr):
        """Rewrite a Stage I expression: loads by position, iterators by coordinate."""
        coords = {var: self.coord[axis] for var, axis in zip(self.it.iter_vars, self.it.axes)}

        def on_var(var, _mutator):
            return coords.get(var, var)

        def on_load(load, _mutator):
            buffer = self._buffer_of(load)
            access = self._access(buffer, list(load.indices), allow_search=True)
            value = tirx.BufferLoad(buffer.position_view, access.positions)
            if access.guards:
                value = tirx.if_then_else(tirx.all(*access.guards), value, offsets.zero(buffer.dtype))
            return value

        return tvm_ffi.structural_mutate(expr, [(TensorLoad, on_load), (tirx.Var, on_var)])

    def _buffer_of(self, load):
        for buffer in self.it.buffers:
            if load.source.same_as(buffer.coordinate_view):
                return buffer
        raise ValueError(f"iteration {self.it.name}: {load.source.name} is not a SparseBuffer of this iteration")

    def _access(self, buffer, indices, *, allow_search: bool) -> _Access:
        """Positions of a buffer access, with the conditions under which it is valid."""
        access = _Access()
        parent_offset = None
        parent_direct = True
        for axis, index in zip(buffer.axes, indices):
            owner = self._iterated_axis(index)
            direct = owner is axis and (axis.parent is None or parent_direct)
            access.direct.append(direct)
            if direct:
                position = self.position[axis]
                access.determined |= {self._loop_of(axis)}
                access.exact.append(True)
            else:
                coordinate = self._rewrite(index)
                self._note_coordinate_buffer(index, axis)
                if not axis.is_sparse:
                    position = coordinate
                    access.guards += self._bounds_guards(index, coordinate, axis)
                    injective = self._injective_loops(index)
                    access.determined |= injective
                    access.exact.append(bool(injective))
                elif not allow_search:
                    raise ValueError(
                        f"iteration {self.it.name}: {buffer.name} is written through axis {axis.name} at a "
                        f"coordinate it does not own; write through the iterated axes instead"
                    )
                else:
                    lo, hi = offsets.row_range(axis, parent_offset)
                    found = self._search(FIND, axis.indices, lo, hi, coordinate)
                    access.guards.append(found >= 0)
                    access.exact.append(False)
                    position = found - lo
            access.positions.append(position)
            parent_offset = self.offset[axis] if direct else offsets.chain_offset(axis, parent_offset, position)
            parent_direct = direct
        return access

    def _note_coordinate_buffer(self, index, axis: Axis) -> None:
        """An index that is a load of an integer buffer (``out[OutIdx[r, p], k]``): its values must be
        coordinates of ``axis``, which every call checks, so no out-of-range entry is dropped silently."""
        if not isinstance(index, TensorLoad):
            return
        buffer = next((b for b in self.it.buffers if index.source.same_as(b.coordinate_view)), None)
        if buffer is not None and buffer.dtype.startswith("int"):
            axes = self.coordinates.setdefault(buffer, [])
            if axis not in axes:
                axes.append(axis)

    def _bounds_guards(self, index, coordinate, axis) -> list:
        """Conditions keeping a computed coordinate inside a dense axis, unless provable.

        Coordinates of iterated axes lie in [0, length) (inputs are validated), which is
        what the proof may use; e.g. a padded block row ``io * b + ii`` may pass ``m``.
        """
        analyzer = sym.Analyzer()
        for var, owner in zip(self.it.iter_vars, self.it.axes):
            analyzer.bind(var, tvm.ir.Range.from_min_extent(0, owner.length))
        guards = []
        if not analyzer.can_prove(index >= 0):
            guards.append(coordinate >= 0)
        if not (analyzer.can_prove(index < axis.length) or _below_scaled(analyzer, index, axis.length)):
            guards.append(coordinate < axis.length)
        return guards

    def _injective_loops(self, index) -> set:
        """Loops that a coordinate expression tells apart: distinct positions of them give
        distinct coordinates. Known cases: the iterator of an axis whose chain positions have
        distinct coordinates (a dense or distinct root, which tells its own loop apart, or a
        distinct and disjoint sparse child, which tells apart its loop and its ancestors'), and
        ``outer * L + inner`` with ``outer`` over a distinct root and ``inner`` over a dense axis
        of length L. Empty when nothing is known."""
        owner = self._iterated_axis(index)
        if owner is not None:
            return self._chain_loops(owner) if owner.chain_distinct else set()
        if isinstance(index, tirx.Add) and isinstance(index.a, tirx.Mul):
            outer, inner = self._iterated_axis(index.a.a), self._iterated_axis(index.b)
            scale = index.a.b
            if (outer is not None and inner is not None and _distinct_root(outer) and inner.kind == DENSE_FIXED
                    and tvm_ffi.structural_equal(scale, inner.length)):
                return {self._loop_of(outer), self._loop_of(inner)}
        return set()

    def _chain_loops(self, axis: Axis) -> set:
        """The loops of ``axis`` and its ancestors (empty when an ancestor is not iterated here)."""
        iterated = {a for loop in self.loops for a in loop.axes}
        chain = axis.chain()
        if any(a not in iterated for a in chain):
            return set()
        return {self._loop_of(a) for a in chain}

    def _iterated_axis(self, index):
        if isinstance(index, tirx.Var):
            for var, axis in zip(self.it.iter_vars, self.it.axes):
                if var.same_as(index):
                    return axis
        return None

    def _loop_of(self, axis: Axis) -> int:
        for index, loop in enumerate(self.loops):
            if axis in loop.axes:
                return index
        raise AssertionError(axis)

    def _lower_store(self, store):
        access = self._access(store.buffer, list(store.indices), allow_search=False)
        lowered = Store(store.buffer, tuple(access.positions), self._rewrite(store.value), store.reducer,
                        predicate=tuple(access.guards), atomic=self.it.atomic and store.accumulate)
        return lowered, access

    # -- blocks ------------------------------------------------------------------------
    def _build_blocks(self, stores) -> list:
        search_levels = {self.level[s.result] for s in self.searches}
        starts = [0]
        for index in range(1, len(self.loops)):
            if self._level_of(self.loops[index].extent) >= 0 or (index - 1) in search_levels:
                starts.append(index)
        block_of = [sum(1 for s in starts if s <= index) - 1 for index in range(len(self.loops))]
        blocks = [
            Block(f"{self.it.name}{b}", self.loops[start:end])
            for b, (start, end) in enumerate(zip(starts, starts[1:] + [len(self.loops)]))
        ]
        for search in self.searches:
            blocks[max(block_of[self.level[search.result]], 0)].searches.append(search)
        for outer, inner in zip(blocks, blocks[1:]):
            outer.body.append(inner)

        fills = []
        reduction_blocks = {block_of[i] for i, loop in enumerate(self.loops) if loop.kind == "R"}
        spatial_loops = {i for i, loop in enumerate(self.loops) if loop.kind == "S"}
        blocks[0].parallel_safe = self.loops[0].kind == "S" and all(0 in access.determined for _, access in stores)
        for store, access in stores:
            blocks[-1].body.append(store)
            if not store.accumulate or self.it.init is None:
                continue
            init_value = tirx.const(self.it.init_of(store), store.buffer.dtype)
            # In place: a T.init in the reduction block sets every element the spatial loops
            # address (each exactly once), then the reduction accumulates onto it.
            # Non-direct (but exact) targets only where the iteration initialises just what it writes.
            exact = all(access.direct) or (self.it.init_scope == WRITTEN and all(access.exact))
            in_place = (
                len(reduction_blocks) == 1
                and exact
                and not store.predicate
                and access.determined == spatial_loops
                and all(block_of[i] <= min(reduction_blocks) for i in spatial_loops)
            )
            if in_place:
                blocks[min(reduction_blocks)].init.append(Store(store.buffer, store.positions, init_value))
            else:
                fills.append(Fill(store.buffer, init_value))
        return fills + [blocks[0]]


@dataclass
class _Access:
    positions: list = field(default_factory=list)
    guards: list = field(default_factory=list)  # all must hold for the access to be valid
    direct: list = field(default_factory=list)  # per dimension: indexed by the iteration's own axis
    determined: set = field(default_factory=set)  # loops whose positions the access tells apart
    exact: list = field(default_factory=list)  # per dimension: an injective function of those loops


def _distinct_root(axis: Axis) -> bool:
    """Distinct positions of a root axis give distinct coordinates."""
    return axis.parent is None and (axis.kind == DENSE_FIXED or axis.distinct)


def _below_scaled(analyzer, index, length) -> bool:
    """Whether ``0 <= index < length`` for a length ``L * c`` (``c`` a positive constant) proves as
    ``index // c < L``: TVM's analyzer does not prove ``jo * b + ji < nb * b`` from ``jo < nb`` and
    ``0 <= ji < b`` (a block format's columns against B's ``nb * b`` rows), but simplifies the quotient."""
    if not (isinstance(length, tirx.Mul) and isinstance(length.b, tirx.IntImm) and length.b.value > 0):
        return False
    return analyzer.can_prove(index >= 0) and analyzer.can_prove(tirx.floordiv(index, length.b) < length.a)
