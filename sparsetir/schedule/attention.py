"""Schedules for block-sparse attention (``ops.attention``): register tiles on the CPU, rows fused.

The Stage III function has one nest per stage (transpose, scores, row max, exponent, row sum,
weighted sum, normalise), each over the batch ``g`` and the block rows ``r0`` outermost and,
inside, a block over the row's blocks (``c0``), the columns of a block (``c1``), the rows of a
block (``r1``) and the head dimension. The CPU template gives each stage a register tile:

* scores ``S[c0, c1, r1] += Qt[d, r1] * K[col(c0, c1), d]``: for a tile of ``c1``, the ``d``
  loop outside, ``r1`` vectorised, the tile of scores kept in registers (``cache_write``);
* row max, exponent, row sum: ``r1`` vectorised (a block's rows are contiguous in ``S``), the
  row's max and sum in registers; ``exp`` as a vectorisable polynomial (``polynomial_exp``);
* weighted sum ``Oacc[r1, d] += S[c0, c1, r1] * V[col, d]``: ``row_tile`` rows by the whole
  head dimension in registers, ``d`` vectorised, the row's blocks inside.

With ``fuse_rows`` (:func:`fuse_row_nests`), the nests that share the (g, r0) loops become one
parallel loop whose body runs the stages one after the other for one block row; the
intermediates (``S``, ``mx``, ``sm``, ``Oacc``, ``Qt``) shrink to that row's part, so the
score matrix is never written whole. Without it, each nest is a parallel loop of its own.

The knobs are declared here (``fuse_rows``, ``row_tile``, ``score_tile``; ``tensor_cores`` on
CUDA) with the op scope: ``ops.attention`` passes them to ``schedule.schedule_attention``, which
picks this CPU template or the CUDA one (``attention_cuda.py``) from ``schedule.ATTENTION_TEMPLATES``.
"""

from __future__ import annotations

import math

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir.expr import TensorLoad

from .knobs import Knob, boolean, int_at_least, knob_settings, register_knob
from .nest import all_blocks, apply_or_force, force_loop_kinds, loop_extent, new_schedule

for _knob in (
    Knob("fuse_rows", ("cpu",), True, (True, False), boolean("fuse_rows"),
         "sparse attention: run every stage of one block row under one loop (scores kept per row, never "
         "written whole); False: one parallel loop per stage", scope="op"),
    Knob("fuse_rows", ("cuda",), False, (False, True), boolean("fuse_rows"),
         "sparse attention: every stage of one block row in one CUDA block, the row's scores in shared memory "
         "(rows up to the shared-memory limit); False: one kernel per stage, scores in device memory", scope="op"),
    Knob("row_tile", ("cpu",), 4, (4, 2, 8), int_at_least("row_tile", 1, 64),
         "sparse attention: rows of a block whose weighted sums stay in registers together", scope="op"),
    Knob("score_tile", ("cpu",), 0, (0, 4, 8, 16), int_at_least("score_tile", 0, 256),
         "sparse attention: columns of a block whose scores stay in registers together (0: 256 / block)",
         scope="op"),
    Knob("tensor_cores", ("cuda",), True, (True, False), boolean("tensor_cores"),
         "sparse attention: float16/bfloat16 block products on tensor cores (wmma 16x16x16)", scope="op"),
):
    register_knob(_knob)

ATTENTION_KNOBS = {"cpu": ("fuse_rows", "row_tile", "score_tile"), "cuda": ("fuse_rows", "tensor_cores")}
STAGES = ("zero_rows", "transpose_q", "scores", "rowmax", "exponent", "rowsum", "aggregate", "normalise")
VECTOR_BYTES = 64


def attention_settings(device: str, knobs: dict) -> dict:
    """Every attention knob of ``device`` with its value (given, checked, or the default);
    ``TypeError`` for a name that is not one."""
    unknown = sorted(set(knobs) - set(ATTENTION_KNOBS[device]))
    if unknown:
        raise TypeError(f"unknown {device} knob(s) {unknown} for sparse_attention; valid: "
                        f"{list(ATTENTION_KNOBS[device])}")
    settings = knob_settings(device, {k: v for k, v in knobs.items()}, scope="op")
    return {name: settings[name] for name in ATTENTION_KNOBS[device]}


# ------------------------------------------------------------------------------------------ CPU
def schedule_attention_cpu(func: tirx.PrimFunc, *, structure: dict, fuse_rows: bool = True, row_tile: int = 4,
                           score_tile: int = 0) -> tvm.IRModule:
    """Register-tiled stages (see the module docstring), fused per block row or parallel one by one."""
    sch = new_schedule(func)
    names = {sch.get(b).name_hint for b in all_blocks(sch)}
    forced: dict = {}  # loop var -> ForKind, where TVM refuses an in-place update it cannot prove
    for stage in STAGES:
        inner, outer = f"{stage}1", f"{stage}0"
        if inner in names:
            getattr(_CPU_STAGES, stage, _CPU_STAGES.elementwise)(sch, sch.get_sblock(inner), row_tile=row_tile,
                                                                   score_tile=score_tile, forced=forced)
        elif outer in names:
            _CPU_STAGES.flat(sch, sch.get_sblock(outer), forced=forced)
    mod = force_loop_kinds(sch.mod, forced)
    if fuse_rows:
        mod = fuse_row_nests(mod, structure)
    mod = parallel_outer_loops(mod)
    return polynomial_exp(mod)


def _lanes(dtype: str) -> int:
    bits = int("".join(ch for ch in dtype if ch.isdigit()) or 32)
    return VECTOR_BYTES * 8 // bits


def _vectorize_tail(sch, loop, lanes: int, forced: dict | None = None):
    """Vectorise ``loop`` (split to at most ``lanes`` wide, the outer part unrolled); with ``forced``,
    a loop TVM refuses (an in-place update: ``S = exp(S ...)``) is vectorised after scheduling."""
    extent = loop_extent(sch, loop)
    if extent is None or extent <= 1:
        return
    if extent > lanes and extent % lanes == 0:
        outer, loop = sch.split(loop, [None, lanes])
        sch.unroll(outer)
    if forced is None:
        sch.vectorize(loop)
    else:
        apply_or_force(sch, sch.vectorize, loop, tirx.ForKind.VECTORIZED, forced)


class _CPU_STAGES:
    """One schedule per stage; each takes the stage's inner block (over c0, c1, r1[, d])."""

    @staticmethod
    def scores(sch, block, *, score_tile: int, **_):
        loops = sch.get_loops(block)
        if len(sch.get(block).iter_vars) != 4:  # CSR: (c0, d) -> a dot product per key
            return
        c0, c1, r1, d = loops[-4:]
        rows = loop_extent(sch, r1)
        tile = score_tile or max(1, 256 // max(rows, 1))
        cols = loop_extent(sch, c1)
        tile = min(tile, cols)
        while cols % tile:
            tile -= 1
        # the scores of one block in registers, indexed by the block's own iterators (a format
        # whose blocks share one flat dimension, SR-BCRS's group * g + column, keeps a fixed shape)
        cache = sch.reindex_cache_write(block, 0, "local", lambda b, c, r, _: (b, c, r))
        c1o, c1i = sch.split(c1, [None, tile])
        sch.reorder(c1o, d, c1i, r1)
        sch.reverse_compute_at(cache, c1o)
        _vectorize_tail(sch, sch.get_loops(cache)[-1], 16)
        sch.unroll(c1i)
        sch.vectorize(r1)
        sch.decompose_reduction(block, d)

    @staticmethod
    def rowmax(sch, block, **_):
        _row_reduction(sch, block)

    @staticmethod
    def rowsum(sch, block, **_):
        _row_reduction(sch, block)

    @staticmethod
    def aggregate(sch, block, *, row_tile: int, **_):
        loops = sch.get_loops(block)
        if len(sch.get(block).iter_vars) != 4:  # CSR: (c0, d), the row's weighted sum in registers
            c0, d = loops[-2:]
            cache = sch.cache_write(block, 0, "local")
            _vectorize_tail(sch, sch.get_loops(cache)[-1], 16)
            _vectorize_tail(sch, d, 16)
            sch.decompose_reduction(block, c0)
            return
        c0, c1, r1, d = loops[-4:]
        rows = loop_extent(sch, r1)
        tile = min(row_tile, rows)
        while rows % tile:
            tile -= 1
        r1o, r1i = sch.split(r1, [None, tile])
        sch.reorder(r1o, c0, c1, r1i, d)
        cache = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(cache, r1o)
        _vectorize_tail(sch, sch.get_loops(cache)[-1], 16)
        sch.unroll(r1i)
        _vectorize_tail(sch, d, 16)
        sch.decompose_reduction(block, c0)

    @staticmethod
    def elementwise(sch, block, *, forced, **_):
        """A stage whose inner loops are all spatial (the exponent): the innermost loop vectorised."""
        _vectorize_tail(sch, sch.get_loops(block)[-1], 16, forced)

    @staticmethod
    def flat(sch, block, *, forced):
        """A single-block nest (transpose, normalise, zeroing): its innermost loop vectorised."""
        loops = sch.get_loops(block)
        if len(loops) > 2:
            _vectorize_tail(sch, loops[-1], 16, forced)


def _row_reduction(sch, block):
    """``mx[r1] = max(mx[r1], S[c0, c1, r1])`` (or a sum): ``r1`` vectorised, the row's values in registers."""
    loops = sch.get_loops(block)
    kinds = [int(iv.iter_type) for iv in sch.get(block).iter_vars]
    cache = sch.cache_write(block, 0, "local")
    if kinds[-1] == 0:  # (c0, c1, r1): the rows of a block innermost
        sch.vectorize(loops[-1])
        _vectorize_tail(sch, sch.get_loops(cache)[-1], 16)
        sch.decompose_reduction(block, loops[-3])
    else:  # CSR: (c0,)
        sch.decompose_reduction(block, loops[-1])


# ------------------------------------------------------------------------------------------ passes
def parallel_outer_loops(mod: tvm.IRModule) -> tvm.IRModule:
    """The outermost loop of every nest (the fused (g, r0) loop, or g, fused with r0 where both are
    plain loops over a block's iteration) marked parallel: distinct block rows write apart."""

    def on_block(block, mutator):
        if block.name_hint != "root":
            return mutator.default_mutate(block)
        body = block.body
        stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
        return s_tir.SBlock(block.iter_vars, block.reads, block.writes, block.name_hint,
                            tirx.SeqStmt([_parallel_nest(s) for s in stmts]) if len(stmts) > 1 else _parallel_nest(
                                stmts[0]), block.init, block.alloc_buffers, block.match_buffers, block.annotations)

    return tvm_ffi.structural_mutate(mod, [(s_tir.SBlock, on_block)])


def _parallel_nest(stmt):
    """The first plain loop of a nest (under its scope block) made parallel, fused with the next one."""
    if isinstance(stmt, s_tir.SBlockRealize):
        block = stmt.block
        return s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, s_tir.SBlock(
            block.iter_vars, block.reads, block.writes, block.name_hint, _parallel_nest(block.body), block.init,
            block.alloc_buffers, block.match_buffers, block.annotations))
    if isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.SERIAL:
        inner = stmt.body
        if isinstance(inner, tirx.For) and inner.kind == tirx.ForKind.SERIAL and _is_const(inner.extent) \
                and _is_const(inner.min) and inner.min.value == 0 and _is_const(stmt.min) and stmt.min.value == 0:
            fused = tirx.Var(f"{stmt.loop_var.name}_{inner.loop_var.name}", stmt.loop_var.ty)
            extent = inner.extent
            body = _substitute(inner.body, {stmt.loop_var: tirx.floordiv(fused, extent),
                                            inner.loop_var: tirx.floormod(fused, extent)})
            return tirx.For(fused, 0, stmt.extent * extent, tirx.ForKind.PARALLEL, body)
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, tirx.ForKind.PARALLEL, stmt.body)
    return stmt


def _is_const(expr) -> bool:
    return isinstance(expr, tirx.IntImm)


def _substitute(stmt, mapping: dict):
    def on_var(var, _mutator):
        for old, new in mapping.items():
            if var.same_as(old):
                return new
        return var

    return tvm_ffi.structural_mutate(stmt, [(tirx.Var, on_var)])


def polynomial_exp(mod: tvm.IRModule) -> tvm.IRModule:
    """Every float32 ``exp`` as a Cody-Waite range reduction and a degree-6 polynomial (Cephes
    ``expf``, relative error about 1e-7), which vectorises where LLVM's ``exp`` calls libm per lane."""

    def on_call(call, mutator):
        call = mutator.default_mutate(call)
        if getattr(call.op, "name", None) != "tirx.exp" or str(call.ty) != "float32":
            return call
        return exp_polynomial(call.args[0])

    return tvm_ffi.structural_mutate(mod, [(tvm.ir.expr.Call, on_call)])


def exp_polynomial(x):
    """``exp(x)`` for a float32 expression, from float arithmetic and one integer shift; NaN stays NaN
    and ``x`` past float32's overflow (88.72284) is ``inf``, as libm's ``expf`` (the clamp before the
    polynomial would turn both into finite numbers: docs/nan-semantics.md)."""
    f32 = "float32"

    def c(value):
        return tirx.const(value, f32)

    original = x
    x = tirx.Min(tirx.Max(x, c(-87.33654)), c(88.37626))
    n = tirx.floor(x * c(1.44269504088896341) + c(0.5))
    r = x - n * c(0.693359375) + n * c(2.12194440e-4)
    p = c(1.9875691500e-4)
    for coefficient in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = p * r + c(coefficient)
    p = p * r * r + r + c(1.0)
    bits = tirx.shift_left(tirx.Cast("int32", n) + tirx.const(127, "int32"), tirx.const(23, "int32"))
    value = p * tirx.reinterpret(f32, bits)
    return tirx.if_then_else(tirx.isnan(original), original,
                             tirx.if_then_else(original > c(88.72284), c(math.inf), value))


def fuse_row_nests(mod: tvm.IRModule, structure: dict | None = None, anchor: str = "scores0") -> tvm.IRModule:
    """The nests whose two outer loops are those of ``anchor``'s nest (the batch ``g`` and the
    block rows ``r0``) as one loop nest: one block per (g, r0) runs each nest's body in turn.

    Requires: the nests follow one another in the root block (others, such as zeroing the output,
    stay before or after them), each is a loop over ``g`` and one over ``r0`` with the anchor's
    extents, and no nest reads what a later one writes for another (g, r0) (true of attention,
    whose stages read only the current block row's intermediates). TVM's lowering then allocates
    each intermediate inside the fused loop, compacted to what one block row touches.

    ``structure``: the values of the kernel's structure arrays (name -> numpy array); with them
    an intermediate whose per-row part has a data-dependent extent (a row's blocks) is allocated
    for the longest row (evaluated on the host) and indexed from the row's first position.

    Before::

        for g, r0: block scores0 { S[g, r0's blocks] = ... }
        for g, r0: block rowmax0 { mx[g, r0] = max(S[g, r0's blocks]) }

    After::

        for g, r0: block attention_rows {
            block scores0 { S[g, r0's blocks] = ... }
            block rowmax0 { mx[g, r0] = max(S[g, r0's blocks]) } }
    """
    (global_var,) = mod.functions.keys()
    func = mod[global_var]
    root = func.body.block
    stmts = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    peeled = [_outer_pair(stmt) for stmt in stmts]
    anchor_index = next((i for i, p in enumerate(peeled) if p is not None and p[3] == anchor), None)
    if anchor_index is None:
        raise ValueError(f"fuse_row_nests: no nest {anchor} with two outer loops")
    extents = peeled[anchor_index][0]
    fusable = [p is not None and _same_extents(p[0], extents) for p in peeled]
    start = anchor_index
    while start > 0 and fusable[start - 1]:
        start -= 1
    end = anchor_index
    while end + 1 < len(stmts) and fusable[end + 1]:
        end += 1
    idtype = str(peeled[anchor_index][1][0].ty)
    outer_vars = [tirx.Var(name, idtype) for name in ("g", "r0")]
    block_vars = [tirx.IterVar(tvm.ir.Range.from_min_extent(0, e), tirx.Var(f"v{v.name}", idtype),
                               tirx.IterVar.DataPar) for e, v in zip(extents, outer_vars)]
    bodies = []
    for index in range(start, end + 1):
        _, loop_vars, body, _ = peeled[index]
        bodies.append(_substitute(body, {old: new.var for old, new in zip(loop_vars, block_vars)}))
    buffers = {p: p for p in func.params if type(p.ty).__name__ == "BufferType"}
    for stmt in stmts:
        if isinstance(stmt, tirx.AllocBuffer):
            buffers[stmt.buffer] = stmt.buffer
    # intermediates only the fused nests touch move into the fused block (one block row's part)
    outside = _buffers_used(stmts[:start] + stmts[end + 1:])
    local = [stmt.buffer for stmt in stmts if isinstance(stmt, tirx.AllocBuffer) and stmt.buffer not in outside]
    body = tirx.SeqStmt(bodies)
    reads, writes = s_tir.analysis.get_sblock_read_write_region(
        s_tir.SBlock(block_vars, [], [], "attention_rows", body), buffers)
    if structure is not None:
        ranges = {v.var: int(e.value) if isinstance(e, tirx.IntImm) else 1 for v, e in zip(block_vars, extents)}
        replaced = {}
        for buffer in local:
            region = _union_region([r for r in [*reads, *writes] if r.source.same_as(buffer)])
            if region is not None:
                replaced[buffer] = _row_part(buffer, region, structure, ranges)
        body = _reindex(body, replaced)
        local = [replaced[b][0] if b in replaced else b for b in local]
    keep = [region for region in reads if not any(region.source.same_as(b) for b in local)]
    written = [region for region in writes if not any(region.source.same_as(b) for b in local)]
    keep = [r for r in keep if not any(r.source.same_as(b) for b in (replaced if structure is not None else {}))]
    written = [r for r in written if not any(r.source.same_as(b) for b in (replaced if structure is not None else {}))]
    block = s_tir.SBlock(block_vars, keep, written, "attention_rows", body, None, local)
    realize = s_tir.SBlockRealize(outer_vars, tirx.const(True, "bool"), block)
    nest = tirx.For(outer_vars[0], 0, extents[0], tirx.ForKind.SERIAL,
                    tirx.For(outer_vars[1], 0, extents[1], tirx.ForKind.SERIAL, realize))
    new_stmts = [stmt for stmt in stmts[:start] if not (isinstance(stmt, tirx.AllocBuffer) and stmt.buffer in local)]
    new_stmts += [nest] + stmts[end + 1:]
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint,
                            tirx.SeqStmt(new_stmts) if len(new_stmts) > 1 else new_stmts[0], root.init,
                            root.alloc_buffers, root.match_buffers, root.annotations)
    body = s_tir.SBlockRealize(func.body.iter_values, func.body.predicate, new_root)
    return tvm.IRModule({global_var: func.with_body(body)})


def _union_region(regions):
    """The ranges of the first region (the fused stages all touch the same part of a row)."""
    return regions[0] if regions else None


def _row_part(buffer, region, structure: dict, ranges: dict):
    """``(new buffer, mins)``: ``buffer`` cut to one block row's part, each dimension as long as
    its longest extent over the rows (evaluated on the host), indexed from the part's start."""
    shape, mins = [], []
    for dim, rng in zip(buffer.shape, region.region):
        extent = rng.extent
        if isinstance(extent, tirx.IntImm):
            size = int(extent.value)
        else:
            size = max(1, int(evaluate_over_rows(extent, structure, ranges).max(initial=1)))
            size = min(size, int(dim.value)) if isinstance(dim, tirx.IntImm) else size
        shape.append(size)
        mins.append(rng.min)
    new = tirx.decl_buffer(shape, buffer.dtype, buffer.name, data_alignment=64)
    return new, mins


def _reindex(stmt, replaced: dict):
    """Loads, stores and block regions of the replaced buffers, indexed from their part's start."""
    if not replaced:
        return stmt
    analyzer = tvm.arith.Analyzer() if hasattr(tvm, "arith") else None

    def lookup(buffer):
        for old, value in replaced.items():
            if buffer.same_as(old):
                return value
        return None

    def simplify(expr):
        return analyzer.simplify(expr) if analyzer is not None else expr

    def on_load(load, mutator):
        found = lookup(load.source)
        if found is None:
            return mutator.default_mutate(load)
        new, mins = found
        indices = [mutator.mutate(i) for i in load.indices]
        return tirx.BufferLoad(new, [simplify(i - m) for i, m in zip(indices, mins)])

    def on_store(store, mutator):
        found = lookup(store.buffer)
        if found is None:
            return mutator.default_mutate(store)
        new, mins = found
        value = mutator.mutate(store.value)
        indices = [mutator.mutate(i) for i in store.indices]
        return tirx.BufferStore(new, value, [simplify(i - m) for i, m in zip(indices, mins)])

    def on_region(region, mutator):
        found = lookup(region.source)
        if found is None:
            return mutator.default_mutate(region)
        new, mins = found
        return tirx.BufferRegion(new, [tvm.ir.Range.from_min_extent(simplify(r.min - m), r.extent)
                                         for r, m in zip(region.region, mins)])

    return tvm_ffi.structural_mutate(stmt, [(TensorLoad, on_load), (tirx.BufferStore, on_store),
                                            (tvm.ir.TensorRegion, on_region)])


def evaluate_over_rows(expr, structure: dict, ranges: dict):
    """``expr`` (integer arithmetic over the fused loop variables and loads of structure arrays)
    evaluated on the host for every value of the variables in ``ranges``; a numpy array."""
    names = list(ranges)
    grids = np.meshgrid(*[np.arange(ranges[v], dtype=np.int64) for v in names], indexing="ij") if names else []
    values = {v: g.reshape(-1) for v, g in zip(names, grids)}

    def ev(e):
        if isinstance(e, tirx.IntImm):
            return np.int64(e.value)
        if isinstance(e, tirx.Var) and not hasattr(e, "shape"):
            for v, array in values.items():
                if e.same_as(v):
                    return array
            raise ValueError(f"evaluate_over_rows: unknown variable {e}")
        if isinstance(e, TensorLoad):
            array = structure.get(e.source.name)
            if array is None:
                raise ValueError(f"evaluate_over_rows: no host values for {e.source.name}")
            (index,) = e.indices
            return np.asarray(array, dtype=np.int64)[ev(index)]
        if isinstance(e, tirx.Cast):
            return ev(e.value)
        ops = {tirx.Add: np.add, tirx.Sub: np.subtract, tirx.Mul: np.multiply, tirx.FloorDiv: np.floor_divide,
               tirx.FloorMod: np.mod, tirx.Min: np.minimum, tirx.Max: np.maximum}
        for kind, op in ops.items():
            if isinstance(e, kind):
                return op(ev(e.a), ev(e.b))
        raise ValueError(f"evaluate_over_rows: cannot evaluate {type(e).__name__} {e}")

    return np.atleast_1d(np.asarray(ev(expr)))


def _buffers_used(stmts) -> set:
    """Buffers loaded or stored by ``stmts`` (AllocBuffer declarations do not count)."""
    found = []

    def on_load(load):
        found.append(load.source)

    def on_store(store):
        found.append(store.buffer)

    for stmt in stmts:
        if not isinstance(stmt, tirx.AllocBuffer):
            tvm_ffi.structural_walk(stmt, [(TensorLoad, on_load), (tirx.BufferStore, on_store)])
    return _BufferSet(found)


class _BufferSet:
    def __init__(self, buffers):
        self.buffers = list(buffers)

    def __contains__(self, buffer) -> bool:
        return any(buffer.same_as(b) for b in self.buffers)


def _outer_pair(stmt):
    """``(extents, loop vars, body under them, name of the block there)`` of a nest whose two outer
    loops are plain loops from 0 (under its scope block); None for any other nest."""
    if isinstance(stmt, s_tir.SBlockRealize) and not stmt.block.iter_vars:
        stmt = stmt.block.body
    if not (isinstance(stmt, tirx.For) and isinstance(stmt.body, tirx.For)):
        return None
    outer, inner = stmt, stmt.body
    if not all(_is_const(loop.min) and loop.min.value == 0 for loop in (outer, inner)):
        return None
    below = inner.body
    while isinstance(below, tirx.For):
        below = below.body
    name = below.block.name_hint if isinstance(below, s_tir.SBlockRealize) else ""
    return (outer.extent, inner.extent), (outer.loop_var, inner.loop_var), inner.body, name


def _same_extents(a, b) -> bool:
    return all(tvm_ffi.structural_equal(x, y) for x, y in zip(a, b))
