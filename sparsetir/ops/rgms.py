"""RGMS, relational gather-matmul-scatter: ``Y[i] = sum_r sum_j A_r[i, j] X[j] W[r]``, from the IR.

The op the R-GCN layer and sparse convolution share (kernel offsets play the relations). A
relational format (``formats/relcsr.py``, ``formats/csf.py``) declares the axes of its structure
and the order they are iterated; this module writes the computation over them, in one of three
dataflows (the knob ``dataflow``):

``edge``       ``Y[i, k] += A[r, i, j] * X[j, l] * W[r, l, k]``: every edge multiplies its row of X
               by W_r (2 nnz f_in f_out flops, no intermediate);
``aggregate``  ``H[i, r, l] += A * X[j, l]``, then ``Y[i, k] += H[i, r, l] * W[r, l, k]``: each
               (row, relation) sums its neighbours first and multiplies by W_r once;
``transform``  ``T[r, j, k] = X[j] W_r`` for every node, then ``Y[i, k] += A * T[r, j, k]``
               (R n f_in f_out flops first, then an SpMM per relation).

``H`` and ``T`` are intermediates the kernel allocates. With no format given, ``csf`` (rows
outermost, parallel with no atomics) and the dataflow with the fewest flops are chosen.

The knob ``feature_loops`` orders the two feature loops of every product with ``W``: ``kl`` (the
default: a dot product over ``l`` per output feature ``k``) or ``lk`` (the output features
innermost: one vectorised row of ``W`` per input feature, accumulators kept in registers).
"""

from __future__ import annotations

import time

import numpy as np

from .. import hooks
from ..formats import parse_format, registered_formats
from ..formats.relational import read_relational_input
from ..ir import IDENTITY, SparseBuffer, SparseFunction, cast, dense_fixed, sparse_iteration, where
from ..ir.axis import expr_dtype
from ..ir.padding import guard_padding, is_floating
from ..reference.rgms import RGMS_REFERENCE, rgms_flops_by_dataflow
from ..runtime.kernel import Kernel
from ..runtime.slot_layout import SlotLayout
from ..schedule.knobs import Knob, knob, knob_names, register_knob
from ..schedule.staged import STAGED_KNOBS
from ..transform.stage_tile import stage_tile
from .operands import (
    HALF_DTYPES,
    check_dense_operand,
    check_op_knobs,
    compiled_function,
    owned,
    resolve_dtype,
    target_and_device,
)
from .prepared import PREPARED, options_key
from .registry import OpSpec, check_feat, get_op, register_op

DATAFLOWS = ("edge", "aggregate", "transform")
FEATURE_LOOPS = ("kl", "lk")
DEFAULT_FORMAT = "csf"


def _dataflow(value):
    if value is not None and value not in DATAFLOWS:
        raise ValueError(f"dataflow must be one of {DATAFLOWS} or None, got {value!r}")
    return value


def _staged(fmt) -> bool:
    return bool(getattr(fmt, "staged", False))


register_knob(Knob("dataflow", ("cpu", "cuda"), None, (None, *DATAFLOWS), _dataflow,
                   "rgms: per-edge products, aggregate-then-transform or transform-then-aggregate (None: the "
                   "fewest flops)", scope="op", requires=lambda value, fmt, device: value in (None, "edge") or
                   not _staged(fmt), requirement="a tiled format (rtile) computes per-pair products"))


def _feature_loops(value):
    if value not in FEATURE_LOOPS:
        raise ValueError(f"feature_loops must be one of {FEATURE_LOOPS}, got {value!r}")
    return value


register_knob(Knob("feature_loops", ("cpu", "cuda"), "kl", FEATURE_LOOPS, _feature_loops,
                   "rgms: the feature loops of each product with W, outermost first: kl (a dot product per output "
                   "feature) or lk (output features innermost: vectorised, W read row by row)", scope="op",
                   requires=lambda value, fmt, device: value == "kl" or not _staged(fmt),
                   requirement="a tiled format's staged schedule orders the feature loops itself"))


def _stage(value):
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"stage must be True, False or None, got {value!r}")
    return value


register_knob(Knob("stage", ("cpu",), None, (None,), _stage,
                   "rgms/conv with no format given: run the staged tiles (rtile: gather, register-blocked product, "
                   "scatter) or not (csf); None: the cost rule (choose_staged)", scope="op"))

#: the cost rule of ``stage=None`` (choose_staged): stage when a (part, relation) group fills at least
#: this many tiles on average, each pair carries at least STAGE_MIN_PRODUCT multiply-adds (c_in x c_out),
#: and either at least STAGE_AGGREGATE_PRODUCT of them or nearly one entry per (row, relation) (a kernel
#: map: aggregating first saves nothing). Measured on KITTI (quiet-bench, load < 1): rtile beat csf at
#: 4:32 (0.89 against 1.26 ms), 32:32 (2.9 against 5.0 ms) and every larger layer; on AIFB/MUTAG at 32x32,
#: where rows repeat per relation, csf's aggregate dataflow stays ahead (2.69 against 2.74 ms on AIFB).
STAGE_MIN_TILES_PER_GROUP = 1.0
STAGE_MIN_PRODUCT = 64
STAGE_AGGREGATE_PRODUCT = 2048
STAGE_MIN_PAIR_SHARE = 0.9
#: parts of the output rows of a staged tile on CUDA (one warp each, run in parallel): an estimate, not a
#: measurement (no GPU here), of enough warps to fill a GPU's SMs
CUDA_PARTS = 512


def _feature_axes(K, L, feature_loops: str):
    """The two feature axes in loop order, their kinds, and ``pick(it) -> (k, l)`` from the iterators."""
    if feature_loops == "lk":
        return [L, K], "RS", lambda it: (it[-1], it[-2])
    return [K, L], "SR", lambda it: (it[-2], it[-1])


def rgms_function(fmt, f_in: int, f_out: int, dtype: str = "float32", idtype: str = "int32", device: str = "cpu",
                  dataflow: str = "edge", accum_dtype: str | None = None, feature_loops: str = "kl") -> SparseFunction:
    """The Stage I RGMS in relational format ``fmt`` (see the module docstring for ``dataflow`` and
    ``feature_loops``).

    A format in several parts (a list of axes) gets the iterations of each part in turn: the
    first initialises Y, the others accumulate onto it (``init=None``)."""
    structure = fmt.structure(idtype, device)
    parts = list(structure) if isinstance(structure, (list, tuple)) else [structure]
    first = parts[0]
    dense_rows = dense_fixed("I_", first.rows.length, idtype)
    dense_cols = dense_fixed("J_", first.cols.length, idtype)
    dense_rels = dense_fixed("R_", first.relations.length, idtype)
    L, K = dense_fixed("L", f_in, idtype), dense_fixed("K", f_out, idtype)
    X = SparseBuffer("X", (dense_cols, L), dtype)
    W = SparseBuffer("W", (dense_rels, L, K), dtype)
    Y = SparseBuffer("Y", (dense_rows, K), dtype)
    if dataflow not in DATAFLOWS:
        raise ValueError(f"dataflow must be one of {DATAFLOWS}, got {dataflow!r}")
    _feature_loops(feature_loops)
    if getattr(fmt, "staged", False):
        return _staged_function(first, X, W, Y, L, K, dtype, accum_dtype)
    features, feature_kinds, pick = _feature_axes(K, L, feature_loops)
    iterations, values = [], []
    if dataflow == "transform":
        T = SparseBuffer("T", (dense_rels, dense_cols, K), dtype)

        @sparse_iteration([dense_rels, dense_cols, *features], "SS" + feature_kinds, name="transform",
                          accum_dtype=accum_dtype)
        def transform(*it):
            r, j, (k, l) = it[0], it[1], pick(it)
            T[r, j, k] += X[j, l] * W[r, l, k]

        iterations.append(transform)
    for index, axes in enumerate(parts):
        A = SparseBuffer(axes.values, axes.loops, dtype)
        values.append(A)
        iterations += _part_iterations(axes, A, X, W, Y, T if dataflow == "transform" else None, L, K, dtype, dataflow,
                                       accum_dtype, IDENTITY if index == 0 else None, feature_loops)
    return SparseFunction("rgms", iterations, params=[*values, X, W, Y])


def _staged_function(axes, X, W, Y, L, K, dtype, accum_dtype) -> SparseFunction:
    """RGMS over a tiled format (``formats/rtile.py``): each tile's dense product into the intermediate
    ``Pt`` (one row per slot), then its rows, scaled by the slots' values, added onto Y; staged per tile
    (``transform.stage_tile``), so ``Pt`` holds one tile.

    The product reads every slot's input row and the tile's ``W[r]`` (the tile axis's coordinate is
    its relation): ``Pt[p, t, s, k] += X[j, l] * W[t, l, k]``, ``Y[s, k] += A[p, t, s] * Pt[p, t, s, k]``
    (one column per slot, so its value scales the whole row)."""
    parts, tiles, slots, cols = axes.loops
    A = SparseBuffer(axes.values, (parts, tiles, slots), dtype)
    wide = "float32" if dtype in HALF_DTYPES else dtype
    Pt = SparseBuffer("Pt", (parts, tiles, slots, K), wide)

    @sparse_iteration([parts, tiles, slots, cols, L, K], "SSSRRS", name="tile", accum_dtype=accum_dtype)
    def product(p, t, s, j, l, k):
        Pt[p, t, s, k] += cast(X[j, l], wide) * cast(W[t, l, k], wide)  # half operands, wide products (wmma's)

    @sparse_iteration([parts, tiles, slots, K], "SRSS", name="scatter", accum_dtype=accum_dtype)
    def scatter(p, t, s, k):
        Y[s, k] += cast(_skip_padding(axes, cast(A[p, t, s], wide) * Pt[p, t, s, k], A[p, t, s]), dtype)

    func = SparseFunction("rgms", [product, scatter], params=[A, X, W, Y])
    return stage_tile(func, "tile", "scatter", depth=2, disjoint=True)


def _skip_padding(axes, value, slot):
    """``value`` (a product of the slot's value ``slot``), or for a padded format (``axes.padded``:
    ``ell3d``'s buckets, ``rtile``'s tiles) the same guarded to add nothing for a padding slot (-0.0):
    its column is a real one, so ``0 * X[col]`` would put a NaN of X into a row that does not read it
    (``ir.padding``, docs/nan-semantics.md)."""
    return guard_padding(value, slot, 0) if axes.padded and is_floating(expr_dtype(slot)) else value


def _part_iterations(axes, A, X, W, Y, T, L, K, dtype, dataflow, accum_dtype, init, feature_loops="kl") -> list:
    """The iterations of one part of the structure; ``init=None`` accumulates onto Y as it is."""
    features, feature_kinds, pick = _feature_axes(K, L, feature_loops)
    loops = list(axes.loops)
    kinds = "".join("S" if axis is axes.rows else "R" for axis in loops)

    def role(coordinates, axis):
        return coordinates[loops.index(axis)]

    if dataflow == "edge":
        @sparse_iteration([*loops, *features], kinds + feature_kinds, name="rgms" + axes.suffix, atomic=axes.atomic,
                          accum_dtype=accum_dtype, init=init)
        def edge(*it):
            i, r, j, (k, l) = role(it, axes.rows), role(it, axes.relations), role(it, axes.cols), pick(it)
            Y[i, k] += _skip_padding(axes, A[it[:3]] * X[j, l] * W[r, l, k], A[it[:3]])

        return [edge]
    if dataflow == "aggregate":
        outer = loops[:2]
        H = SparseBuffer("H" + axes.suffix, (*outer, L), "float32" if dtype in HALF_DTYPES else dtype)

        @sparse_iteration([*loops, L], "SSRS", name="aggregate" + axes.suffix, accum_dtype=accum_dtype)
        def gather(*it):
            j, l = role(it, axes.cols), it[-1]
            H[(*it[:2], l)] += cast(_skip_padding(axes, A[it[:3]] * X[j, l], A[it[:3]]), H.dtype)

        counted = []
        if not outer[1].is_sparse:  # every (relation, row) pair is iterated, those with no edge too
            # count each pair's edges, and multiply by W_r only where there is one: H = 0 times a non-finite
            # W_r would put NaN in rows with no edge of relation r (docs/nan-semantics.md; issue 27's fuzz suite)
            Hn = SparseBuffer("Hn" + axes.suffix, tuple(outer), H.dtype)

            @sparse_iteration(loops, "SSR", name="count" + axes.suffix, accum_dtype=accum_dtype)
            def count(*it):
                Hn[it[:2]] += cast(1, H.dtype)

            counted.append(count)

        @sparse_iteration([*outer, *features], "".join("S" if a is axes.rows else "R" for a in outer) + feature_kinds,
                          name="transform" + axes.suffix, atomic=axes.atomic, accum_dtype=accum_dtype, init=init)
        def multiply(*it):
            i, r, (k, l) = role(it, axes.rows), role(it, axes.relations), pick(it)
            product = cast(H[(*it[:2], l)], dtype) * W[r, l, k]
            Y[i, k] += where(Hn[it[:2]] > 0, product, cast(0, dtype)) if counted else product

        return [gather, *counted, multiply]

    @sparse_iteration([*loops, K], kinds + "S", name="aggregate" + axes.suffix, atomic=axes.atomic,
                      accum_dtype=accum_dtype, init=init)
    def aggregate(*it):
        i, r, j, k = role(it, axes.rows), role(it, axes.relations), role(it, axes.cols), it[-1]
        Y[i, k] += _skip_padding(axes, A[it[:3]] * T[r, j, k], A[it[:3]])

    return [aggregate]


def rgms_feature_args(feat) -> tuple[int, int]:
    """``(f_in, f_out)`` from one size (both) or a pair."""
    if isinstance(feat, (list, tuple)):
        if len(feat) != 2:
            raise ValueError(f"rgms feat is f or (f_in, f_out), got {feat!r}")
        return check_feat(feat[0], "f_in"), check_feat(feat[1], "f_out")
    size = check_feat(feat)
    return size, size


def choose_dataflow(matrix, f_in: int, f_out: int) -> str:
    """The dataflow with the fewest flops on a relational input (``aggregate`` multiplies once per
    non-empty (row, relation) pair)."""
    pairs = int(np.count_nonzero(np.diff(np.asarray(matrix.indptr, dtype=np.int64))))
    sizes = {"nrel": matrix.num_relations, "n": matrix.shape[1], "nnz": matrix.nnz, "pairs": pairs}
    flops = rgms_flops_by_dataflow(sizes, f_in, f_out)
    return min(DATAFLOWS, key=lambda name: (flops[name], DATAFLOWS.index(name)))


def choose_staged(matrix, f_in: int, f_out: int, device: str = "cpu", dtype: str | None = None) -> bool:
    """The cost rule of the untuned default (``format=None, stage=None``; constants above): run staged
    tiles (``rtile``) when the (part, relation) groups fill whole tiles on average (little padding) and
    the pairs' dense products are big, or each (row, relation) holds about one entry (per-pair products
    are then the work anyway, and the register-blocked micro-kernel does them best); else ``csf``
    (output-stationary, no scatter, the aggregate dataflow where rows repeat).

    On CUDA the staged tile runs on tensor cores (``schedule/staged_cuda.py``), so it is chosen only
    for float16/bfloat16 ``dtype`` with ``f_in`` and ``f_out`` multiples of 16, and the groups are
    counted over the CUDA parts (``CUDA_PARTS``, one warp each)."""
    if f_in * f_out < STAGE_MIN_PRODUCT or not matrix.nnz or device not in ("cpu", "cuda"):
        return False
    from ..formats.rtile import DEFAULT_PARTS, DEFAULT_ROWS  # noqa: PLC0415 - the format registers itself

    parts = DEFAULT_PARTS
    if device == "cuda":
        from ..schedule.staged_cuda import check_tensor_core_tile  # noqa: PLC0415 - loads the wmma intrinsics

        try:
            check_tensor_core_tile(DEFAULT_ROWS, f_in, f_out, str(dtype))
        except ValueError:
            return False
        parts = CUDA_PARTS
    degrees = np.diff(np.asarray(matrix.indptr, dtype=np.int64))
    counts = degrees.reshape(matrix.num_relations, -1).sum(axis=1)
    groups = np.count_nonzero(counts) * parts
    if matrix.nnz / (groups * DEFAULT_ROWS) < STAGE_MIN_TILES_PER_GROUP:
        return False
    pairs = np.count_nonzero(degrees)
    return f_in * f_out >= STAGE_AGGREGATE_PRODUCT or pairs >= STAGE_MIN_PAIR_SHARE * matrix.nnz


def default_format(matrix, f_in: int, f_out: int, device: str, stage=None, dtype: str | None = None) -> str:
    """The format of an untuned call (``format=None``): ``rtile`` where staging pays (``stage=True``, or
    :func:`choose_staged` for ``stage=None``), else ``csf``. On CUDA ``rtile`` has ``CUDA_PARTS``
    parts, and ``stage=True`` where tensor cores cannot take the tile is a ``ValueError``."""
    staged = choose_staged(matrix, f_in, f_out, device, dtype) if stage is None else bool(stage)
    if not staged:
        return DEFAULT_FORMAT
    if device == "cuda":
        from ..formats.rtile import DEFAULT_ROWS  # noqa: PLC0415
        from ..schedule.staged_cuda import check_tensor_core_tile  # noqa: PLC0415

        check_tensor_core_tile(DEFAULT_ROWS, f_in, f_out, str(dtype))
        return f"rtile:{DEFAULT_ROWS}:{CUDA_PARTS}"
    return "rtile"


def compile_rgms(adj, f_in: int, f_out: int, *, format=None, target="llvm", dtype=None, index_dtype=None,
                 **knobs) -> Kernel:
    """Compile RGMS for a relational structure.

    Parameters
    ----------
    adj : RelationalGraph or list of sparse matrices
        ``sparsetir.data.load_relational(name)``, or R scipy/torch sparse matrices of one shape
        (``A_r[i, j] != 0`` iff an edge ``j -> i`` of relation ``r``).
    f_in, f_out : int
        Columns of X and of Y (W is ``(R, f_in, f_out)``).
    format : str, optional
        A relational format (``"csf"``, ``"relcsr"``), ``None`` (csf) or ``"auto"`` (the tuning
        database; tunes on a miss).
    target, dtype, index_dtype
        As for ``compile_spmm``.
    **knobs
        ``dataflow`` ("edge", "aggregate", "transform"; default: the fewest flops), ``feature_loops``
        ("kl", "lk"), ``accum_dtype`` and the schedule template's knobs.

    Returns
    -------
    Kernel
        Called as ``kernel(X, W, out=None, values=None)``; ``values`` follow adj's stored entries
        (relation by relation, each in canonical CSR order).
    """
    f_in, f_out = check_feat(f_in, "f_in"), check_feat(f_out, "f_out")
    started = time.perf_counter()
    matrix = read_relational_input(adj)
    if isinstance(format, str) and format.strip().lower() == "auto":
        config = hooks.format_resolver()("rgms", matrix, (f_in, f_out), target=target, dtype=dtype)
        format, knobs = config["format"], {**{k: v for k, v in config.items() if k != "format"}, **knobs}
    target, device = target_and_device(target)
    stage = _stage(knobs.pop("stage", None))
    if format is None:
        format = default_format(matrix, f_in, f_out, device, stage, resolve_dtype(dtype, matrix.values.dtype, device))
    elif stage is not None and stage != _staged(parse_format(format)):
        raise ValueError(f"stage={stage} contradicts format={format!r}; give one of them")
    fmt = parse_format(format)
    spec = get_op("rgms")
    if not spec.accepts(fmt):
        formats = ", ".join(cls.name for cls in registered_formats() if spec.accepts(cls))
        raise ValueError(f"rgms runs in a relational format ({formats}), not {format!r}")
    fmt = fmt.resolve(matrix)
    dtype = resolve_dtype(dtype, matrix.values.dtype, device)
    arrays, sizes, placement = fmt.build(matrix.with_values(dtype), index_dtype)
    idtype = fmt.index_dtype(matrix, index_dtype)
    layout = placement if isinstance(placement, SlotLayout) else None
    knobs = dict(knobs)
    if dtype in HALF_DTYPES and knobs.get("accum_dtype") is None:
        knobs["accum_dtype"] = "float32"
    if getattr(fmt, "staged", False) and device == "cuda":  # refused before any kernel is built
        from ..schedule.staged_cuda import check_tensor_core_tile  # noqa: PLC0415

        check_tensor_core_tile(fmt.rows, f_in, f_out, dtype)
    if getattr(fmt, "staged", False):  # per-pair products, tile by tile, outputs innermost (stage_tile)
        if knobs.get("dataflow") not in (None, "edge"):
            raise ValueError(f"{fmt!r} computes per-pair products tile by tile (dataflow='edge'), not "
                             f"dataflow={knobs['dataflow']!r}")
        knobs["dataflow"] = "edge"
        _feature_loops(knobs.pop("feature_loops", "kl"))  # the staged schedule orders the feature loops itself
    if knobs.get("dataflow") is None:
        knobs["dataflow"] = choose_dataflow(matrix, f_in, f_out)
    if knobs.get("feature_loops") == "kl":
        del knobs["feature_loops"]  # the default: one kernel (and cache key) whether it is named or not
    knobs = check_op_knobs(knobs, fmt, device)
    for name in STAGED_KNOBS:  # schedule knobs that only a tiled format uses: refused elsewhere, not ignored
        declared = knob(device, name) if name in knob_names(device) else None
        if declared is not None and name in knobs and not declared.allows(declared.check(knobs[name]), fmt, device):
            raise ValueError(f"{name}={knobs[name]!r} cannot apply to {fmt!r}: {declared.requirement}")
    convert_s = time.perf_counter() - started
    started = time.perf_counter()
    function = compiled_function(
        "rgms", lambda: rgms_function(fmt, f_in, f_out, dtype, idtype, device, knobs["dataflow"],
                                      knobs.get("accum_dtype"), knobs.get("feature_loops", "kl")),
        fmt, (f_in, f_out), dtype, idtype, target, {k: v for k, v in knobs.items() if v is not None}, sizes)
    compile_s = time.perf_counter() - started
    kernel_spec = {"op": "rgms", "format": repr(fmt), "feat": [f_in, f_out], "dtype": dtype, "index_dtype": idtype,
                   "inputs": ["X", "W"], "outputs": ["Y"], "values": list(layout.values) if layout else ["A"],
                   "dataflow": knobs["dataflow"]}
    if "feature_loops" in knobs:
        kernel_spec["feature_loops"] = knobs["feature_loops"]
    kernel = Kernel(function, kernel_spec, owned(arrays, matrix), sizes, layout, None if layout else placement)
    kernel.timings = {"convert_s": convert_s, "compile_s": compile_s}
    kernel.matrix = matrix
    return kernel


def rgms(adj, X, W, *, format=None, target="llvm", out=None, **knobs):
    """``Y = sum_r A_r @ X @ W[r]`` for a relational ``adj`` (see :func:`compile_rgms`).

    Parameters
    ----------
    adj : RelationalGraph or list of sparse matrices
        R relations of one ``m x n`` shape; the values are used as given (never normalised).
    X : numpy array or torch tensor
        ``(n, f_in)``.
    W : numpy array or torch tensor
        ``(R, f_in, f_out)``, of X's type and dtype.
    format, target, out, **knobs
        As for :func:`compile_rgms`; ``out`` is written in place and returned.

    Returns
    -------
    numpy array or torch tensor
        ``(m, f_out)`` with X's type and dtype.
    """
    dtype = check_dense_operand(X, "X")
    check_dense_operand(W, "W", ndim=3)
    if type(X) is not type(W) or str(W.dtype) != str(X.dtype):
        raise TypeError(f"X and W must be of one type and dtype, got {type(X).__name__} {X.dtype} and "
                        f"{type(W).__name__} {W.dtype}")
    matrix = read_relational_input(adj)
    m, n = matrix.shape
    if X.shape[0] != n:
        raise ValueError(f"the relations are {m}x{n}, so X needs {n} rows, got {X.shape[0]}")
    if W.shape[0] != matrix.num_relations or W.shape[1] != X.shape[1]:
        raise ValueError(f"W must be ({matrix.num_relations}, {X.shape[1]}, f_out) for {matrix.num_relations} "
                         f"relations and X's {X.shape[1]} columns, got {tuple(W.shape)}")
    key = options_key("rgms", matrix.shape, matrix.num_relations, int(X.shape[1]), int(W.shape[2]), dtype,
                      np.dtype(matrix.values.dtype).str, format, target, knobs)
    kernel = PREPARED.get(key, (matrix.indptr, matrix.indices, matrix.values), lambda: compile_rgms(
        matrix, int(X.shape[1]), int(W.shape[2]), format=format, target=target, dtype=dtype, **knobs))
    return kernel(X, W, out=out)


RGMS = register_op(OpSpec("rgms", function=rgms_function, compile=compile_rgms, call=rgms, reference=RGMS_REFERENCE,
                          knobs={"cpu": {"dataflow": ..., "feature_loops": ..., **STAGED_KNOBS},
                                 "cuda": {"dataflow": ..., "feature_loops": ...}},
                          default_format=DEFAULT_FORMAT, input="relational",
                          feature_sizes=lambda X, W: (int(X.shape[1]), int(W.shape[2])),
                          feature_args=rgms_feature_args))

__all__ = ["compile_rgms", "rgms", "rgms_function"]
