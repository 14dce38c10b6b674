"""``lower_sparse_buffer``: Stage II -> Stage III, an ordinary ``s_tir`` PrimFunc over flat buffers.

Each sparse buffer becomes a buffer with one dimension per axis chain, indexed
by chain offsets (``A[i, j]`` over CSR becomes ``A[J_indptr[i] + j]``; a dense
``C(I, K)`` stays ``C[i, k]``). Metadata arrays and the symbolic sizes become
parameters. Searches become ``while`` loops over a
block-local state buffer. Every block is an ``s_tir`` block, so
``tvm.s_tir.Schedule`` can split, bind, vectorise and decompose it.

Before (Stage II)::

    C[i, k] += A[i, j] * B[J_indices[J_indptr[i] + j], k]

After (Stage III, TVMScript)::

    C[vi, vk] = C[vi, vk] + A[J_indptr[vi] + vj] * B[J_indices[J_indptr[vi] + vj], vk]
"""

from __future__ import annotations

import json

import tvm_ffi
from tvm import sym, tirx
from tvm.ir.expr import TensorLoad
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as T

from ..ir.padding import is_floating
from .offsets import buffer_offsets
from .regions import widen_local_dependent_regions
from .stage2 import FIND, Block, Fill, FusedGroup, Search, Stage2Function, Store, _local_buffers

# numpy (and torch) allocations are at least this aligned; kernels must not assume more.
BUFFER_ALIGNMENT = 16
SIGNATURE_ATTR = "sparsetir.signature"
# Block annotation: distinct iterations of the nest's outer loop write disjoint outputs, so the
# loop may run in parallel even where TVM cannot prove it (accumulation without an init).
PARALLEL_SAFE_ATTR = "sparsetir.parallel_safe"
# Block annotation: the top block of a horizontally fused group (FusedGroup), whose members the
# lowering made atomic where their writes may collide.
FUSED_GROUP_ATTR = "sparsetir.fused_group"
# Atomic max/min: calls to these extern functions (suffix "max"/"min"), defined in the CUDA source.
ATOMIC_PREFIX = "sparsetir_atomic_"


def _node_name(node) -> str:
    return f"{node.buffer.name}_fill" if isinstance(node, Fill) else node.name


def combine(reducer: str, current, value):
    """``current`` and ``value`` combined by ``reducer``.

    A floating-point max (min) propagates a NaN from either side, as torch's ``amax``/``amin`` and
    numpy's ``maximum`` do (docs/nan-semantics.md): TVM's ``Max`` is a compare-and-select
    (``a > b ? a : b``), which drops a NaN accumulator, so the float form keeps ``current`` when it is
    NaN and otherwise takes ``value`` unless ``current`` is larger (a NaN ``value`` then wins)::

        C[i] = T.Select(C[i] > v or T.isnan(C[i]), C[i], v)      # max; "<" for min

    One compare more per update; it vectorises as the plain select does."""
    if reducer == "sum":
        return current + value
    if is_floating(value.ty):
        wins = current > value if reducer == "max" else current < value
        return tirx.Select(tirx.Or(wins, tirx.isnan(current)), current, value)
    return tirx.Max(current, value) if reducer == "max" else tirx.Min(current, value)


def atomic_update(reducer: str, address, value):
    """The atomic form of a reduction into ``*address``: CUDA's ``atomicAdd`` for sums, and for max
    and min a helper of the CUDA build (``backend.cuda.ATOMIC_HELPERS``) on the float's bit pattern.
    On the CPU the template turns them back into plain updates of loops it keeps serial."""
    if reducer == "sum":
        return T.cuda.atomic_add(address, value)
    return tirx.call_extern(str(value.ty), f"{ATOMIC_PREFIX}{reducer}", address, value)


def flat_shape(buffer) -> list:
    """Stage III shape of a sparse buffer: one dimension per axis chain."""
    return [chain[-1].chain_size() for chain in buffer.chains()]


def lower_sparse_buffer(func: Stage2Function) -> tirx.PrimFunc:
    """Emit the Stage III PrimFunc. Its ``sparsetir.signature`` attribute describes each parameter."""
    if not isinstance(func, Stage2Function):
        raise TypeError(f"lower_sparse_buffer takes a Stage II function, got {type(func).__name__}")
    return _Emitter(func).emit()


class _Emitter:
    def __init__(self, func: Stage2Function):
        self.func = func
        self.flat: dict = {}  # SparseBuffer -> flat tirx buffer
        self.by_view = {b.position_view: b for b in [*func.buffers, *func.intermediates]}
        self.analyzer = sym.Analyzer()
        self.params: list[dict] = []
        self.searched: set[str] = set()  # index arrays that binary searches need sorted
        self.outputs: list[str] = []

    def emit(self) -> tirx.PrimFunc:
        func = self.func
        with IRBuilder() as builder:
            with T.prim_func(s_tir=True):
                T.func_name(func.name)
                T.func_attr({"tirx.noalias": True})
                self._declare_params()
                for node in func.body:
                    if len(func.body) > 1:
                        # Each nest in its own scope block: TVM's schedule checks (reduction,
                        # compact dataflow) then see it as the only writer of its outputs.
                        with T.sblock(f"{_node_name(node)}_scope"):
                            self._emit_node(node, {})
                    else:
                        self._emit_node(node, {})
        prim = widen_local_dependent_regions(builder.get())
        return prim.with_attr(SIGNATURE_ATTR, json.dumps(self._signature()))

    def _signature(self) -> dict:
        axes = [
            {
                "name": axis.name,
                "kind": axis.kind,
                "parent": axis.parent.name if axis.parent is not None else None,
                "length": str(axis.length),
                "nnz": None if axis.nnz is None else str(axis.nnz),
                "nnz_cols": None if axis.nnz_cols is None else str(axis.nnz_cols),
                "indptr": None if axis.indptr is None else axis.indptr.name,
                "indices": None if axis.indices is None else axis.indices.name,
                "sorted": axis.indices is not None and axis.indices.name in self.searched,
                "distinct": axis.distinct,
                "disjoint": axis.disjoint,
            }
            for axis in self.func.axes
        ]
        return {"params": self.params, "axes": axes, "outputs": self.outputs}

    # -- parameters --------------------------------------------------------------------
    def _declare_params(self) -> None:
        for buffer in self.func.buffers:
            shape = flat_shape(buffer)
            flat = T.arg(buffer.name, T.buffer(shape, buffer.dtype, align=BUFFER_ALIGNMENT))
            self.flat[buffer] = flat
            self._sign(buffer.name, "buffer", buffer.name, buffer.dtype, shape)
            if buffer in self.func.coordinates:  # checked on every call (runtime.signature)
                self.params[-1]["coordinates_of"] = [{"axis": axis.name, "length": str(axis.length)}
                                                     for axis in self.func.coordinates[buffer]]
        for axis in self.func.axes:
            for role, meta in (("indptr", axis.indptr), ("indices", axis.indices)):
                if meta is not None:
                    T.arg(meta.name, meta)
                    self._sign(meta.name, role, axis.name, meta.dtype, meta.shape)
        # Every symbolic size is also a scalar parameter: TVM then checks it against the shapes
        # it appears in, and ``specialize`` can bind it to a constant.
        for var in self.func.size_vars:
            T.arg(var.name, var)
            self._sign(var.name, "size", var.name, self.func.idtype, [])
        # Intermediates: allocated by the kernel (host workspace on the CPU, device memory the
        # host allocates on CUDA), alive for the whole call.
        local = {b for node in self.func.body if isinstance(node, Block) for b in _local_buffers(node)}
        for buffer in self.func.intermediates:
            if buffer in local:
                continue  # allocated in its block (``Block.local_buffers``)
            self.flat[buffer] = T.alloc_buffer(flat_shape(buffer), buffer.dtype, align=BUFFER_ALIGNMENT)
            IRBuilder.name(buffer.name, self.flat[buffer])

    def _sign(self, name, role, of, dtype, shape) -> None:
        self.params.append({"name": name, "role": role, "of": of, "dtype": str(dtype),
                            "shape": [str(d) for d in shape]})

    def _mark_output(self, buffer) -> None:
        if buffer.name not in self.outputs and buffer not in self.func.intermediates:
            self.outputs.append(buffer.name)

    # -- statements --------------------------------------------------------------------
    def _emit_node(self, node, scope: dict) -> None:
        if isinstance(node, Fill):
            self._emit_fill(node)
        elif isinstance(node, Block):
            self._emit_block(node, scope)
        elif isinstance(node, Store):
            self._emit_store(node, scope)
        elif isinstance(node, FusedGroup):
            self._emit_fused(node)
        else:
            raise TypeError(f"unexpected Stage II node {type(node).__name__}")

    def _emit_fill(self, fill: Fill) -> None:
        self._mark_output(fill.buffer)
        flat = self.flat[fill.buffer]
        with T.grid(*flat.shape) as loop_vars:
            loop_vars = [loop_vars] if isinstance(loop_vars, tirx.Var) else list(loop_vars)
            with T.sblock(f"{fill.buffer.name}_fill"):
                block_vars = [T.axis.spatial(dim, v, dtype=self.func.idtype) for dim, v in zip(flat.shape, loop_vars)]
                T.buffer_store(flat, fill.value, block_vars)

    def _emit_block(self, block: Block, scope: dict) -> None:
        scope = dict(scope)
        extents = [self._rewrite(loop.extent, scope) for loop in block.loops]
        if not block.loops:  # a member of a fused group whose only loop became the group's
            self._emit_block_body(block, scope)
            return
        with T.grid(*extents) as loop_vars:
            loop_vars = [loop_vars] if isinstance(loop_vars, tirx.Var) else list(loop_vars)
            for loop, loop_var in zip(block.loops, loop_vars):
                IRBuilder.name(loop.var.name, loop_var)
            with T.sblock(block.name):
                if block.parallel_safe or block.annotations:
                    T.sblock_attr({**({PARALLEL_SAFE_ATTR: 1} if block.parallel_safe else {}), **block.annotations})
                for buffer in block.local_buffers:  # compacted by TVM to the region one instance touches
                    self.flat[buffer] = T.sblock_alloc_buffer(flat_shape(buffer), buffer.dtype, scope="local")
                    IRBuilder.name(f"{buffer.name}_local", self.flat[buffer])
                for loop, loop_var, extent in zip(block.loops, loop_vars, extents):
                    make = T.axis.spatial if loop.kind == "S" else T.axis.reduce
                    block_var = make(extent, loop_var, dtype=self.func.idtype)
                    IRBuilder.name(f"v{loop.var.name}", block_var)
                    scope[loop.var] = block_var
                self._emit_block_body(block, scope)

    def _emit_block_body(self, block: Block, scope: dict) -> None:
        for search in block.searches:
            scope[search.result] = self._emit_search(search, scope)
        if block.init:
            with T.init():
                for store in block.init:
                    self._emit_store(store, scope)
        for child in block.body:
            self._emit_node(child, scope)

    def _emit_fused(self, group: FusedGroup) -> None:
        """One loop over the members' concatenated outer loops; one guard per member."""
        extent = self._rewrite(group.extent, {})
        with T.serial(0, extent) as loop_var:
            IRBuilder.name(group.var.name, loop_var)
            with T.sblock(group.name):
                T.sblock_attr({FUSED_GROUP_ATTR: 1, **({PARALLEL_SAFE_ATTR: 1} if group.parallel_safe else {})})
                fused = T.axis.spatial(extent, loop_var, dtype=self.func.idtype)
                IRBuilder.name(f"v{group.var.name}", fused)
                for outer, offset, size, member in zip(group.outer_vars, group.offsets, group.extents, group.members):
                    offset, size = self._rewrite(offset, {}), self._rewrite(size, {})
                    with T.If(tirx.all(offset <= fused, fused < offset + size)):
                        with T.Then():
                            with T.sblock(f"{member.name}_scope"):  # see emit(): one writer per scope
                                self._emit_block(member, {outer: fused - offset})

    def _emit_store(self, store: Store, scope: dict) -> None:
        self._mark_output(store.buffer)
        flat = self.flat[store.buffer]
        indices = self._flat_indices(store.buffer, store.positions, scope)
        value = self._rewrite(store.value, scope)
        predicate = [self._rewrite(p, scope) for p in store.predicate]
        if predicate:
            with T.If(tirx.all(*predicate)):
                with T.Then():
                    self._emit_update(flat, indices, value, store)
        else:
            self._emit_update(flat, indices, value, store)

    @staticmethod
    def _emit_update(flat, indices, value, store: Store) -> None:
        if store.atomic:
            address = tirx.address_of(tirx.BufferLoad(flat, indices))
            T.evaluate(atomic_update(store.reducer, address, value))
        elif store.accumulate:
            T.buffer_store(flat, combine(store.reducer, tirx.BufferLoad(flat, indices), value), indices)
        else:
            T.buffer_store(flat, value, indices)

    def _emit_search(self, search: Search, scope: dict):
        """Binary search with state [lo, hi, middle/result] in a block-local buffer; returns ``result``."""
        idtype = self.func.idtype
        state = T.sblock_alloc_buffer((3,), idtype, scope="local")
        IRBuilder.name(f"{search.result.name}_state", state)
        lo, hi, key = (self._rewrite(e, scope) for e in (search.lo, search.hi, search.key))
        array = search.array
        if search.mode == FIND:
            self.searched.add(array.name)
        T.buffer_store(state, lo, [0])
        T.buffer_store(state, hi, [1])
        with T.While(state[0] < state[1]):
            # branch-free halving (selects, not an if: no mispredicted branch per step);
            # the midpoint is kept in state[2] so both updates see the same one
            T.buffer_store(state, tirx.floordiv(state[0] + state[1], 2), [2])
            middle = state[2]
            goes_right = array[middle] < key if search.mode == FIND else array[middle] <= key
            T.buffer_store(state, tirx.Select(goes_right, middle + 1, state[0]), [0])
            T.buffer_store(state, tirx.Select(goes_right, state[1], middle), [1])
        if search.mode == FIND:
            missing = tirx.const(-1, idtype)
            hit = tirx.if_then_else(array[state[0]] == key, state[0], missing)
            T.buffer_store(state, tirx.if_then_else(state[0] < hi, hit, missing), [2])
        else:
            T.buffer_store(state, state[0], [2])
        return state[2]

    # -- expressions -------------------------------------------------------------------
    def _flat_indices(self, buffer, positions, scope) -> list:
        positions = [self._rewrite(p, scope) for p in positions]
        return [self.analyzer.simplify(index) for index in buffer_offsets(buffer, positions)]

    def _rewrite(self, expr, scope: dict):
        """Substitute block variables and search results; flatten sparse-buffer loads."""
        if isinstance(expr, int):
            return tirx.const(expr, self.func.idtype)

        def on_var(var, _mutator):
            return scope.get(var, var)

        def on_load(load, mutator):
            buffer = self.by_view.get(load.source)
            if buffer is None:
                return mutator.default_mutate(load)
            return tirx.BufferLoad(self.flat[buffer], self._flat_indices(buffer, list(load.indices), scope))

        return tvm_ffi.structural_mutate(expr, [(TensorLoad, on_load), (tirx.Var, on_var)])
