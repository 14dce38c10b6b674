"""CUDA schedule for block-sparse attention (``ops.attention``): a block row per CUDA block, tensor cores.

Each stage is one kernel; the intermediates live in device memory the host allocates. Every
stage maps its batch and block-row loops (g, r0) to ``blockIdx.x`` and, inside, a block's rows
and columns (or the head dimension) to the threads:

* scores and the weighted sum, in float16/bfloat16 with ``tensor_cores``: one warp per block
  row; the query block, each key block and each value block are gathered into shared memory
  (a block's keys are rows of K that the format's indices name), and the 16x16x16 products run on
  tensor cores (``nvcuda::wmma`` through TVM's tensor intrinsics: fragments loaded from shared
  memory, ``mma_sync``, the accumulators stored to device memory);
* otherwise (float32, or blocks that are no multiple of 16): ``threadIdx.x`` over the rows of a
  block, ``threadIdx.y`` over its columns or the head dimension, each thread summing in registers;
* row max, row sum: a thread per row of the block; exponent, normalise: a thread per element.
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.script import from_source

from .nest import all_blocks, apply_or_force, force_loop_kinds, loop_extent, new_schedule

WARP = 32
TILE = 16
MAX_THREADS = 1024
STAGES = ("zero_rows", "scores", "rowmax", "exponent", "rowsum", "aggregate", "normalise")


ALIGNMENT = 16  # what the lowering declares (numpy and torch allocations guarantee it), not TVM's 64


# The warp matrix (wmma) tensor intrinsics: the semantics of TVM's own (tvm.s_tir.tensor_intrin.cuda),
# written out here for 16-byte-aligned buffers (TVM's ask for 64, which the project's buffers and the
# caches made from them do not promise; a fragment's rows need 16) and for bfloat16, which TVM does
# not register. Parsed from text: importing TVM's intrinsic package parses every target's
# intrinsics and takes minutes on two busy cores.
def _fragment_index(buffer: str, stride: str, rows: int, cols: int) -> str:
    return (f"{buffer}.elem_offset // {buffer}.strides[0] // {rows} * ({buffer}.strides[0] // {cols}) + "
            f"{buffer}.elem_offset % {buffer}.strides[0] // {cols}")


def _buffer(name: str, dtype: str, scope: str, shape=(TILE, TILE), strides: tuple | None = None) -> str:
    strided = f", strides=({strides[0]!r}, {strides[1]!r})" if strides else ""
    return (f'{name}: T.Buffer({tuple(shape)}, "{dtype}"{strided}, scope="{scope}", offset_factor={TILE}, '
            f"align={ALIGNMENT})")


def _intrinsic(name: str, params_desc: list, params_impl: list, reads: str, writes: str, desc_body: str,
               impl_body: str) -> tuple:
    def func(kind: str, params: list, body: str) -> str:
        return (f"# from tvm.script import tirx as T\n@T.prim_func(s_tir=True)\ndef {name}_{kind}({', '.join(params)}):\n"
                f'    with T.sblock("root"):\n        T.reads({reads})\n        T.writes({writes})\n{body}')

    return from_source(func("desc", params_desc, desc_body)), from_source(func("impl", params_impl, impl_body))


def _load(dtype: str, use: str, layout: str) -> tuple:
    scope = f"wmma.matrix_{use}"
    return _intrinsic(
        "wmma_load", [_buffer("A", dtype, "shared"), _buffer("C", dtype, scope)],
        [_buffer("A", dtype, "shared", strides=("s1", "s0")), _buffer("C", dtype, scope, strides=("d1", "d0"))],
        f"A[0:{TILE}, 0:{TILE}]", f"C[0:{TILE}, 0:{TILE}]",
        f"        for i, j in T.grid({TILE}, {TILE}):\n"
        f'            with T.sblock("load"):\n'
        f'                vii, vjj = T.axis.remap("SS", [i, j])\n'
        f"                C[vii, vjj] = A[vii, vjj]\n",
        f"        T.tvm_load_matrix_sync(C.data, {TILE}, {TILE}, {TILE}, {_fragment_index('C', 'd1', TILE, TILE)}, "
        f'T.tvm_access_ptr(T.type_annotation("{dtype}"), A.data, A.elem_offset, A.strides[0] * {TILE}, 1), '
        f'A.strides[0], "{layout}")\n')


def _fill() -> tuple:
    return _intrinsic(
        "wmma_fill", [_buffer("C", "float32", "wmma.accumulator")],
        [_buffer("C", "float32", "wmma.accumulator", strides=("d1", "d0"))], "", f"C[0:{TILE}, 0:{TILE}]",
        f"        for i, j in T.grid({TILE}, {TILE}):\n"
        f'            with T.sblock("init"):\n'
        f'                vii, vjj = T.axis.remap("SS", [i, j])\n'
        f"                C[vii, vjj] = T.float32(0)\n",
        f"        T.tvm_fill_fragment(C.data, {TILE}, {TILE}, {TILE}, {_fragment_index('C', 'd1', TILE, TILE)}, "
        f"T.float32(0))\n")


def _store(scope: str = "global") -> tuple:
    return _intrinsic(
        "wmma_store", [_buffer("A", "float32", "wmma.accumulator"), _buffer("C", "float32", scope)],
        [_buffer("A", "float32", "wmma.accumulator", strides=("d1", "d0")),
         _buffer("C", "float32", scope, strides=("s1", "s0"))],
        f"A[0:{TILE}, 0:{TILE}]", f"C[0:{TILE}, 0:{TILE}]",
        f"        for i, j in T.grid({TILE}, {TILE}):\n"
        f'            with T.sblock("store"):\n'
        f'                vii, vjj = T.axis.remap("SS", [i, j])\n'
        f"                C[vii, vjj] = A[vii, vjj]\n",
        f"        T.tvm_store_matrix_sync(A.data, {TILE}, {TILE}, {TILE}, {_fragment_index('A', 'd1', TILE, TILE)}, "
        f'T.tvm_access_ptr(T.type_annotation("float32"), C.data, C.elem_offset, C.strides[0] * {TILE}, 2), '
        f'C.strides[0], "row_major")\n')


def _sync(dtype: str, b_transposed: bool) -> tuple:
    b_index = "vjj, vkk" if b_transposed else "vkk, vjj"
    desc = [_buffer("A", dtype, "wmma.matrix_a"), _buffer("B", dtype, "wmma.matrix_b"),
            _buffer("C", "float32", "wmma.accumulator")]
    impl = [_buffer("A", dtype, "wmma.matrix_a", strides=("a1", "a0")),
            _buffer("B", dtype, "wmma.matrix_b", strides=("b1", "b0")),
            _buffer("C", "float32", "wmma.accumulator", strides=("c1", "c0"))]
    return _intrinsic(
        "wmma_sync", desc, impl, f"C[0:{TILE}, 0:{TILE}], A[0:{TILE}, 0:{TILE}], B[0:{TILE}, 0:{TILE}]",
        f"C[0:{TILE}, 0:{TILE}]",
        f"        for i, j, k in T.grid({TILE}, {TILE}, {TILE}):\n"
        f'            with T.sblock(""):\n'
        f'                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])\n'
        f'                C[vii, vjj] = C[vii, vjj] + T.Cast("float32", A[vii, vkk]) * T.Cast("float32", B[{b_index}])\n',
        f"        T.tvm_mma_sync(C.data, {_fragment_index('C', 'c1', TILE, TILE)}, A.data, "
        f"{_fragment_index('A', 'a1', TILE, TILE)}, B.data, {_fragment_index('B', 'b1', TILE, TILE)}, C.data, "
        f"{_fragment_index('C', 'c1', TILE, TILE)})\n")


_INTRINSICS: dict = {}


def intrinsics(dtype: str) -> dict:
    """The wmma intrinsics for ``dtype`` operands (float16 or bfloat16) with float32 accumulators,
    registered once per process under ``sparsetir_wmma_*`` names."""
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"tensor cores take float16 or bfloat16 operands, not {dtype}")
    if dtype in _INTRINSICS:
        return _INTRINSICS[dtype]
    short = {"float16": "f16", "bfloat16": "bf16"}[dtype]
    makers = {"load_a": lambda: _load(dtype, "a", "row_major"), "load_b": lambda: _load(dtype, "b", "row_major"),
              "load_b_trans": lambda: _load(dtype, "b", "col_major"), "sync": lambda: _sync(dtype, False),
              "sync_trans": lambda: _sync(dtype, True), "fill": _fill, "store": _store,
              "store_shared": lambda: _store("shared")}
    names = {}
    for key, make in makers.items():
        name = f"sparsetir_wmma_{key}_16x16x16_{short if key not in ('fill', 'store', 'store_shared') else 'f32'}"
        if s_tir.TensorIntrin.get(name, allow_missing=True) is None:
            s_tir.TensorIntrin.register(name, *make())
        names[key] = name
    _INTRINSICS[dtype] = names
    return names


def schedule_attention_cuda(func: tirx.PrimFunc, *, structure: dict, fuse_rows: bool = False,
                            tensor_cores: bool = True) -> tvm.IRModule:
    """One kernel per stage (see the module docstring); ``fuse_rows`` is not built for CUDA yet."""
    if fuse_rows:
        raise ValueError("fuse_rows=True is not built for CUDA yet (a row's scores would have to fit in shared "
                         "memory); use fuse_rows=False: one kernel per stage")
    sch = new_schedule(func)
    names = {sch.get(b).name_hint for b in all_blocks(sch)}
    forced: dict = {}
    for stage in STAGES:
        inner, outer = f"{stage}1", f"{stage}0"
        if inner in names:
            top = sch.get_sblock(outer)
            _bind(sch, _fuse(sch, sch.get_loops(top)), "blockIdx.x", forced)
            block = sch.get_sblock(inner)
            if stage in ("scores", "aggregate") and tensor_cores and _tensorizable(sch, block, stage):
                (_scores_on_tensor_cores if stage == "scores" else _aggregate_on_tensor_cores)(sch, block, forced)
            else:
                getattr(_Stages, stage)(sch, block, forced)
        elif outer in names:
            _Stages.flat(sch, sch.get_sblock(outer), forced)
    return force_loop_kinds(sch.mod, forced)


def _fuse(sch, loops):
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


def _bind(sch, loop, tag: str, forced: dict) -> None:
    """Bind ``loop`` to ``tag``; the lowering proved the iterations write apart, so a refusal by TVM's
    dataflow check (an in-place update, an accumulation into a fill) is overridden."""
    apply_or_force(sch, lambda l: sch.bind(l, tag), loop, tag, forced)


def _threads(sch, loop, tag: str, limit: int, forced: dict):
    """``loop`` split so at most ``limit`` iterations run on ``tag`` threads (the rest serial inside)."""
    extent = loop_extent(sch, loop)
    if extent is not None and extent <= limit:
        _bind(sch, loop, tag, forced)
        return None
    outer, inner = sch.split(loop, [None, limit])
    _bind(sch, inner, tag, forced)
    return outer


class _Stages:
    """Thread mappings of the stages without tensor cores; each takes the stage's inner block."""

    @staticmethod
    def scores(sch, block, forced):
        loops = sch.get_loops(block)
        if len(sch.get(block).iter_vars) != 4:  # CSR: (c0, d): a thread per stored key
            c0, d = loops[-2:]
            _threads(sch, c0, "threadIdx.x", 128, forced)
            sch.decompose_reduction(block, d)
            return
        c0, c1, r1, d = loops[-4:]
        sch.reorder(c1, r1, c0, d)
        _threads(sch, r1, "threadIdx.x", WARP, forced)
        _threads(sch, c1, "threadIdx.y", MAX_THREADS // WARP, forced)
        sch.decompose_reduction(block, d)

    @staticmethod
    def rowmax(sch, block, forced):
        _row_reduction(sch, block, forced)

    @staticmethod
    def rowsum(sch, block, forced):
        _row_reduction(sch, block, forced)

    @staticmethod
    def exponent(sch, block, forced):
        loops = sch.get_loops(block)
        if len(sch.get(block).iter_vars) != 3:  # CSR: (c0,)
            _threads(sch, loops[-1], "threadIdx.x", 128, forced)
            return
        c0, c1, r1 = loops[-3:]
        sch.reorder(c1, r1, c0)
        _threads(sch, r1, "threadIdx.x", WARP, forced)
        _threads(sch, c1, "threadIdx.y", MAX_THREADS // WARP, forced)

    @staticmethod
    def aggregate(sch, block, forced):
        loops = sch.get_loops(block)
        if len(sch.get(block).iter_vars) != 4:  # CSR: (c0, d): a thread per feature
            c0, d = loops[-2:]
            sch.reorder(d, c0)
            _threads(sch, d, "threadIdx.x", WARP * 4, forced)
            sch.decompose_reduction(block, c0)
            return
        c0, c1, r1, d = loops[-4:]
        sch.reorder(r1, d, c0, c1)
        _threads(sch, d, "threadIdx.x", WARP, forced)
        _threads(sch, r1, "threadIdx.y", MAX_THREADS // WARP // 2, forced)
        sch.decompose_reduction(block, c0)

    @staticmethod
    def flat(sch, block, forced):
        """normalise (g, r0, r1, d) or zeroing (g, row, d): the outer loops to blocks, the rest to threads."""
        loops = sch.get_loops(block)
        if len(loops) == 4:
            _bind(sch, _fuse(sch, loops[:2]), "blockIdx.x", forced)
            _threads(sch, loops[3], "threadIdx.x", WARP * 2, forced)
            _threads(sch, loops[2], "threadIdx.y", 8, forced)
        else:
            _bind(sch, _fuse(sch, loops[:2]), "blockIdx.x", forced)
            _threads(sch, loops[-1], "threadIdx.x", WARP * 2, forced)


def _row_reduction(sch, block, forced):
    """``mx[r1] = max(mx[r1], S[c0, c1, r1])`` (or a sum): a thread per row of the block."""
    loops = sch.get_loops(block)
    kinds = [int(iv.iter_type) for iv in sch.get(block).iter_vars]
    if len(kinds) == 3:  # (c0, c1, r1)
        c0, c1, r1 = loops[-3:]
        sch.reorder(r1, c0, c1)
        _threads(sch, r1, "threadIdx.x", WARP, forced)
        sch.decompose_reduction(block, c0)
    else:  # CSR: one row, one thread
        sch.decompose_reduction(block, loops[-1])


# ------------------------------------------------------------------------------------------ tensor cores
def _tensorizable(sch, block, stage: str) -> bool:
    """A block format (c0, c1, r1, d) with 16-multiples and float16/bfloat16 operands."""
    iters = sch.get(block).iter_vars
    if len(iters) != 4:
        return False
    extents = [iv.dom.extent for iv in iters[1:]]
    if not all(isinstance(e, tirx.IntImm) and e.value % TILE == 0 for e in extents):
        return False
    dtypes = {str(region.source.dtype) for region in sch.get(block).reads}
    return bool(dtypes & {"float16", "bfloat16"})


def _operand_dtype(sch, block) -> str:
    dtypes = [str(region.source.dtype) for region in sch.get(block).reads]
    return next(d for d in dtypes if d in ("float16", "bfloat16"))


def _buffer_index(sch, block, name: str) -> int:
    for index, region in enumerate(sch.get(block).reads):
        if region.source.name == name:
            return index
    raise ValueError(f"block {sch.get(block).name_hint} does not read {name}")


def _stage_shared(sch, block, buffer: str, index_map, at, forced):
    """Gather what ``block`` reads of ``buffer`` into shared memory under loop ``at``, indexed by the
    block's iterators (``index_map``: a key block's rows are rows of K that the format's indices name,
    so the copy, not the original, is a dense 16-row tile the fragments load); a warp copies."""
    shared = sch.reindex_cache_read(block, _buffer_index(sch, block, buffer), "shared", index_map)
    sch.compute_at(shared, at)
    loops = sch.get_loops(shared)
    below = [i for i, loop in enumerate(loops) if sch.get(loop).same_as(sch.get(at))][0] + 1
    copy = _fuse(sch, loops[below:])
    _, lane = sch.split(copy, [None, WARP])
    _bind(sch, lane, "threadIdx.x", forced)
    return shared


def _fragment(sch, block, shared, scope: str, at):
    """The wmma fragment of a shared tile, loaded under loop ``at``."""
    fragment = sch.cache_read(block, _buffer_index(sch, block, sch.get(shared).writes[0].source.name), scope)
    if not any(sch.get(loop).same_as(sch.get(at)) for loop in sch.get_loops(fragment)):
        sch.compute_at(fragment, at)
    return fragment


def _scores_on_tensor_cores(sch, block, forced):
    """``S[c0, r1, c1] = Q[r1, :] . K[col(c1), :]`` as 16x16x16 wmma tiles (one warp per block row).

    For a layout with a block's rows last (SR-BCRS) the tile is the transposed product
    ``S[c0, c1, r1] = K[col(c1), :] . Q[r1, :]``, so the accumulators store row-major either way.
    """
    dtype = _operand_dtype(sch, block)
    tensor = intrinsics(dtype)
    transposed = _store_is_transposed(sch, block, "S")
    if not transposed:  # the tile's iterators in the intrinsics' order: (i, j, k) = (rows, columns, d)
        sch.reorder_block_iter_var(block, [0, 2, 1, 3])
    c0, c1, r1, d = sch.get_loops(block)[-4:]
    accumulator = sch.reindex_cache_write(block, 0, "wmma.accumulator", lambda c, i, j, k: (c, i, j))
    d_outer, d_inner = sch.split(d, [None, TILE])
    if transposed:
        sch.reorder(c0, d_outer, c1, r1, d_inner)
        a_map, b_map = (lambda c, i, j, k: (c, i, k)), (lambda c, i, j, k: (j, k))
        a_name, b_name = "K", "Q"
    else:
        sch.reorder(c0, d_outer, r1, c1, d_inner)
        a_map, b_map = (lambda c, i, j, k: (i, k)), (lambda c, i, j, k: (c, j, k))
        a_name, b_name = "Q", "K"
    sch.reverse_compute_at(accumulator, c0)
    _tensorize_product(sch, block, accumulator, tensor, ((a_name, a_map), (b_name, b_map)), c0, d_outer, forced,
                       transposed_b=True)


def _aggregate_on_tensor_cores(sch, block, forced):
    """``Oacc[r1, d] += P[c0, r1, c1] V[col(c1), d]`` as 16x16x16 wmma tiles, the accumulators kept
    across the row's blocks (one warp per block row)."""
    dtype = _operand_dtype(sch, block)
    tensor = intrinsics(dtype)
    sch.reorder_block_iter_var(block, [0, 2, 3, 1])  # (c0, r1, d, c1): the intrinsics' (i, j, k) last
    c0, c1, r1, d = sch.get_loops(block)[-4:]
    accumulator = sch.reindex_cache_write(block, 0, "wmma.accumulator", lambda c, i, f, j: (i, f))
    d_outer, d_inner = sch.split(d, [None, TILE])
    sch.reorder(d_outer, c0, r1, d_inner, c1)
    sch.reverse_compute_at(accumulator, d_outer)
    operands = (("P", lambda c, i, f, j: (c, i, j)), ("V", lambda c, i, f, j: (c, j, f)))
    _tensorize_product(sch, block, accumulator, tensor, operands, c0, c0, forced, transposed_b=False)


def _tensorize_product(sch, block, accumulator, tensor, operands, stage_at, reduce_at, forced, *, transposed_b):
    """Stage both operands (name, index map) in shared memory at ``stage_at``, load them into
    fragments at ``reduce_at``, zero the accumulator there, and tensorize the load, product and store."""
    shared = [_stage_shared(sch, block, name, index_map, stage_at, forced) for name, index_map in operands]
    a_frag = _fragment(sch, block, shared[0], "wmma.matrix_a", reduce_at)
    b_frag = _fragment(sch, block, shared[1], "wmma.matrix_b", reduce_at)
    init = sch.decompose_reduction(block, reduce_at)
    _tensorize_tile(sch, init, tensor["fill"])
    _tensorize_tile(sch, a_frag, tensor["load_a"])
    _tensorize_tile(sch, b_frag, tensor["load_b_trans" if transposed_b else "load_b"])
    _tensorize_tile(sch, block, tensor["sync_trans" if transposed_b else "sync"], loops=3)
    _tensorize_tile(sch, accumulator, tensor["store"])


def _store_is_transposed(sch, block, buffer: str) -> bool:
    """Whether the block stores ``buffer`` with the rows of a block last (SR-BCRS's layout)."""
    indices = []

    def visit(store):
        if store.buffer.name == buffer:
            indices.append(store.indices[-1])

    import tvm_ffi  # noqa: PLC0415

    tvm_ffi.structural_walk(sch.get(block).body, [(tirx.BufferStore, visit)])
    rows = sch.get(block).iter_vars[2].var
    return bool(indices) and isinstance(indices[0], tirx.Var) and indices[0].same_as(rows)


def _tensorize_tile(sch, block, intrinsic: str, loops: int = 2) -> None:
    """Tensorize the innermost ``loops`` loops of ``block`` (a 16x16 or 16x16x16 tile) with ``intrinsic``.

    The block's reads of the format's index arrays (they placed the tiles, in the gathers into
    shared memory) are hidden first: the tile itself reads only fragments (the documented use of
    ``unsafe_hide_buffer_access``).
    """
    indices = [i for i, region in enumerate(sch.get(block).reads)
               if str(region.source.dtype).startswith("int") and "wmma" not in str(region.source.ty)]
    if indices:
        sch.unsafe_hide_buffer_access(block, "read", indices)
    tile = sch.get_loops(block)[-loops:]
    sch.tensorize(tile[0], intrinsic)

