"""SpMM, ``C = A @ B`` with sparse A and dense B, composed from the IR (no template).

Stage I over CSR: ``C[i, k] += A[i, j] * B[j, k]`` over ``[I, J, K]`` with kinds
"SRS"; any other format rewrites it with ``format_decompose``.
"""

from __future__ import annotations

import json
import time

import numpy as np
import scipy.sparse as sp

from ..formats import CSR, CSRMatrix, read_sparse_input
from ..formats.bsr import BlockFormat
from ..formats.matrix import choose_index_dtype, transpose
from ..formats.structure import SourceAxes
from ..ir import SparseBuffer, SparseFunction, cast, dense_fixed, sparse_iteration
from ..reference.spmm import SPMM_REFERENCE
from ..runtime.kernel import Kernel
from ..runtime.marshal import aligned_empty, is_torch
from ..schedule.knobs import Knob, optional_boolean, register_knob
from ..transform.stage_rows import TILE_DTYPES, stage_rows
from .operands import check_dense_operand, compose_format, csr_operand_axes, make_kernel, prepare_op
from .prepared import PREPARED, options_key
from .registry import OpSpec, register_op

register_knob(Knob("block_kernel", ("cpu", "cuda"), None, (None, False, True), optional_boolean("block_kernel"),
                   "spmm over a block format (bsr, dbsr, srbcrs): sum each block row into a local tile "
                   "(transform.stage_rows) that the staged schedule runs as a register-blocked micro-kernel "
                   "(register_rows x register_vectors accumulators; on CUDA: bsr/dbsr blocks as 16x16x16 wmma "
                   "tiles, float16/bfloat16 operands, float32 tile; given explicitly there, not searched), then add it onto C; "
                   "None: the cost rule (choose_block_kernel)",
                   scope="op",
                   requires=lambda value, fmt, device: not value or getattr(fmt, "dense_blocks", False),
                   requirement="a block format (bsr, dbsr, srbcrs)"))


#: the cost rule of ``block_kernel=None`` (choose_block_kernel), CPU only: the micro-kernel where B has at
#: most BLOCK_KERNEL_MAX_FEAT columns, the blocks are at least BLOCK_KERNEL_MIN_BLOCK wide, the values are
#: float32 and no padding guard is needed (block-pruned weights: the guard's mask costs the micro-kernel one
#: AND per FMA). Measured on block-pruned weights against the default bsr schedule (docs/formats.md).
BLOCK_KERNEL_MAX_FEAT = 64
BLOCK_KERNEL_MIN_BLOCK = 16


def choose_block_kernel(fmt, feat: int, device: str, dtype: str, padding_guard: bool) -> bool:
    """The cost rule of the untuned default (``block_kernel=None``; constants above): the register-blocked
    micro-kernel for a ``bsr:b``/``dbsr:b`` SpMM on CPU with float32 values, ``b >= BLOCK_KERNEL_MIN_BLOCK``,
    ``feat <= BLOCK_KERNEL_MAX_FEAT`` and no padding guard; the default bsr schedule otherwise. Never on
    CUDA (tensor cores take float16/bfloat16 only and are not measured: ``block_kernel=True`` asks for them)."""
    return (device == "cpu" and isinstance(fmt, BlockFormat) and dtype == "float32" and not padding_guard
            and fmt.block >= BLOCK_KERNEL_MIN_BLOCK and 0 < feat <= BLOCK_KERNEL_MAX_FEAT)


register_knob(Knob("padding_guard", ("cpu", "cuda"), None, (None,), optional_boolean("padding_guard"),
                   "spmm over bsr/dbsr: guard the padding slots (ir.padding) so a NaN/Inf of B reaches only rows "
                   "that store its column; None: where a stored block has a padding slot inside A's shape (not for "
                   "block-pruned weights, whose blocks are full: their padding lies past the shape, never written "
                   "or read as 0); False: a padding slot multiplies its B row as a zero", scope="op",
                   requires=lambda value, fmt, device: value is None or isinstance(fmt, BlockFormat),
                   requirement="a block format (bsr, dbsr)"))


def spmm_function(fmt, feat: int, dtype: str = "float32", idtype: str = "int32", device: str = "cpu",
                  horizontal_fuse=None, accum_dtype: str | None = None, block_kernel: bool = False,
                  padding_guard: bool = True) -> SparseFunction:
    """The Stage I SpMM in ``fmt`` with ``feat`` columns in B (reduced in ``accum_dtype`` when given);
    ``block_kernel``: each block row of a block format summed in a local tile (``transform.stage_rows``;
    on CUDA the tensor-core form, :func:`tensor_core_block_function`); ``padding_guard=False``: a padded
    format's padding slots are not guarded (``compose_format(skip_padding=False)``)."""
    if block_kernel and device == "cuda":
        return tensor_core_block_function(fmt, feat, dtype, idtype, accum_dtype)
    axes = csr_operand_axes(feat, idtype)
    rows, cols, features = axes.rows, axes.cols, axes.features
    A = SparseBuffer("A", (rows, cols), dtype)
    B = SparseBuffer("B", (axes.dense_cols, features), dtype)
    C = SparseBuffer("C", (rows, features), dtype)

    @sparse_iteration([rows, cols, features], "SRS", name="spmm", accum_dtype=accum_dtype)
    def spmm(i, j, k):
        C[i, k] += A[i, j] * B[j, k]

    func = SparseFunction("spmm", [spmm], params=[A, B, C])
    func = compose_format(func, fmt, SourceAxes(rows, cols, [A], "S", "R"), device, fuse=horizontal_fuse,
                          skip_padding=padding_guard)
    if not block_kernel:
        return func
    _check_block_kernel(dtype, accum_dtype)
    return stage_rows(func, func.iterations[-1].name)  # the format's iteration (after any fill of C)


def tensor_core_block_function(fmt, feat: int, dtype: str, idtype: str = "int32",
                               accum_dtype: str | None = "float32") -> SparseFunction:
    """SpMM over ``bsr:b``/``dbsr:b`` whose block rows run on tensor cores (``block_kernel=True`` on CUDA).

    ``C[i, k] += cast(float32, A[i, j]) * cast(float32, B[j, k])`` (float16/bfloat16 operands, wmma's
    float32 products) composed with the format without the padding guard (``skip_padding=False``:
    ``mma_sync`` multiplies a block as it is, so a padding slot is a zero times its B row), and each
    block row summed in a float32 tile (``stage_rows(tile_dtype="float32")``) cast once onto C. B's
    rows are declared ``nb * b`` (the blocks' columns), so no read of B needs a bounds guard: the
    matrix's columns must be a multiple of the block (``check_tensor_core_blocks``). The CUDA
    schedule (``schedule/staged_cuda.py``) tensorizes the tile."""
    from ..schedule.staged_cuda import check_tensor_core_blocks  # noqa: PLC0415 - loads the wmma intrinsics

    check_tensor_core_blocks(fmt, feat, dtype, accum_dtype)
    axes = csr_operand_axes(feat, idtype)
    rows, cols, features = axes.rows, axes.cols, axes.features
    A = SparseBuffer("A", (rows, cols), dtype)
    source = SourceAxes(rows, cols, [A], "S", "R")
    block_cols = dense_fixed("J_", source.size("nb") * fmt.block, idtype)
    B = SparseBuffer("B", (block_cols, features), dtype)
    C = SparseBuffer("C", (rows, features), dtype)

    @sparse_iteration([rows, cols, features], "SRS", name="spmm")
    def spmm(i, j, k):
        C[i, k] += cast(cast(A[i, j], "float32") * cast(B[j, k], "float32"), dtype)

    func = SparseFunction("spmm", [spmm], params=[A, B, C])
    func = compose_format(func, fmt, source, "cuda", fuse=False, skip_padding=False)
    return stage_rows(func, func.iterations[-1].name, tile_dtype="float32")


def _check_block_kernel(dtype: str, accum_dtype, device: str = "cpu") -> None:
    if device == "cuda":
        from ..schedule.staged_cuda import check_tensor_core_dtype  # noqa: PLC0415 - loads the wmma intrinsics

        check_tensor_core_dtype(dtype, accum_dtype, "block_kernel=True")
        return
    if dtype not in TILE_DTYPES or accum_dtype is not None:
        accumulated = f" accumulated in {accum_dtype}" if accum_dtype else ""
        raise ValueError(f"block_kernel=True runs {' and '.join(TILE_DTYPES)} kernels, not {dtype}{accumulated}")


def compile_spmm(A, feat, *, format="csr", target="llvm", dtype=None, index_dtype=None, transpose_a: bool = False,
                 **knobs) -> Kernel:
    """Compile SpMM for A's structure and ``feat`` columns of B.

    Parameters
    ----------
    A : scipy.sparse matrix or torch sparse tensor
        Its structure is validated and converted to ``format`` (timed as conversion).
    feat : int
        Columns of B (and of C).
    format : str or Format
        A format string (``sparsetir.formats``) or ``"auto"`` (the tuning database; tunes on a miss).
    target : str or dict
        ``"llvm"``, ``"cuda"`` or a TVM target dict.
    dtype : str, optional
        Value dtype of the kernel (default: A's float dtype, else float32).
    index_dtype : str, optional
        ``"int32"`` or ``"int64"`` (default: int32 unless a size needs int64).
    transpose_a : bool
        Compute ``A^T @ B``: the kernel is built for A's transpose (a vectorised, stable host
        transpose, timed as conversion); ``values=`` is still given in A's own CSR order.
    **knobs
        Schedule and op knobs (``sparsetir.schedule.knob_names(device)``).

    Returns
    -------
    Kernel
        Called as ``kernel(B, out=None, values=None)``; ``kernel.timings`` has the conversion
        and compile seconds.
    """
    if not isinstance(transpose_a, bool):
        raise TypeError(f"transpose_a must be True or False, got {transpose_a!r}")
    order, transpose_s = None, 0.0
    if transpose_a:
        started = time.perf_counter()
        A, order = transpose(read_sparse_input(A))
        transpose_s = time.perf_counter() - started
    p, knobs = prepare_op("spmm", A, feat, format=format, target=target, dtype=dtype, index_dtype=index_dtype,
                          knobs=knobs)
    if isinstance(p.fmt, BlockFormat) and knobs.get("padding_guard") is None:  # resolved per matrix (the key)
        knobs = {**knobs, "padding_guard": p.converted.padding_inside_shape()}
    guard = knobs.get("padding_guard", True)
    if knobs.get("block_kernel") is None and getattr(p.fmt, "dense_blocks", False):  # resolved per call (the key)
        knobs = {**knobs, "block_kernel": choose_block_kernel(p.fmt, p.feat, p.device, p.dtype, guard)}
    fuse, accum, blocks = knobs.get("horizontal_fuse"), knobs.get("accum_dtype"), bool(knobs.get("block_kernel"))
    if blocks:
        _check_block_kernel(p.dtype, accum, p.device)
        if p.device == "cuda":
            from ..schedule.staged_cuda import check_tensor_core_blocks  # noqa: PLC0415

            check_tensor_core_blocks(p.fmt, p.feat, p.dtype, accum, shape=p.matrix.shape)
    kernel = make_kernel("spmm", lambda: spmm_function(p.fmt, p.feat, p.dtype, p.idtype, p.device, fuse, accum,
                                                       blocks, guard), p, knobs=knobs, inputs=["B"], output="C")
    if transpose_a:
        kernel.value_order = order
        kernel.timings["convert_s"] += transpose_s
        kernel.spec["transpose_a"] = True
    return kernel


_CSR_TEMPLATES: dict = {}  # (feat, dtype, target) -> a CSR kernel whose compiled function every CSR binding shares


def bind_csr_spmm(indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, shape: tuple, feat: int, *,
                  dtype: str, target="llvm") -> Kernel | None:
    """A CSR SpMM kernel bound to a *validated* structure in int32 arrays that the kernel may own
    (read-only, not shared with a caller), sharing the compiled function of one template kernel
    per (feat, dtype, target): no conversion, copy or format machinery per structure (what a
    stream of fresh structures, as in mini-batch training, needs). None where the sizes need
    int64 indices."""
    (m, n), nnz = shape, int(indices.shape[0])
    if choose_index_dtype(m + 1, n + 1, nnz, m * feat, n * feat) != "int32":
        return None
    template = _csr_template(feat, dtype, target)
    kernel = Kernel(template.function, template.spec, {"J_indptr": indptr, "J_indices": indices, "A": values},
                    {"m": m, "n": n, "nnz": nnz})
    kernel.timings = {"convert_s": 0.0, "compile_s": 0.0}
    return kernel


class FreshCSR:
    """A validated CSR structure's own read-only int32 arrays and values, for the CSR template kernel of its
    (feat, dtype, target), bound lazily: the first call without ``out=`` of a numpy B runs the template's
    compiled function on the arrays directly (``CompiledFunction.invoke``, which marshals each argument; B's
    dimensions and dtype were checked by :func:`spmm`, its feature size is in the cache key), so a structure
    that never comes back (a stream of sampled blocks) costs no Kernel, prepared arguments or call plan; any
    other call binds them as a :class:`~sparsetir.runtime.Kernel` (:func:`bind_csr_spmm`) once and calls that."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, shape: tuple, feat: int,
                 dtype: str, target):
        self._bound = {"J_indptr": indptr, "J_indices": indices, "A": values}
        self.shape, self.feat, self.dtype, self.target = shape, feat, dtype, target
        self.function = _csr_template(feat, dtype, target).function
        self.kernel: Kernel | None = None
        self._called = False

    @property
    def owned_structure(self) -> tuple:
        """indptr, indices and values: the private read-only copies it runs on (``ops.prepared`` compares
        a structure against them)."""
        return tuple(self._bound.values())

    def __call__(self, B, out=None):
        if self.kernel is None:
            if out is None and not self._called and type(B) is np.ndarray:
                self._called = True
                (m, n), nnz = self.shape, int(self._bound["J_indices"].shape[0])
                C = aligned_empty((m, self.feat), self.dtype)
                self.function.invoke({**self._bound, "B": B, "C": C}, {"m": m, "n": n, "nnz": nnz})
                return C
            self.kernel = bind_csr_spmm(*self._bound.values(), self.shape, self.feat, dtype=self.dtype,
                                        target=self.target)
        return self.kernel(B, out=out)


def _csr_template(feat: int, dtype: str, target) -> Kernel:
    key = (feat, dtype, json.dumps(target, sort_keys=True) if isinstance(target, dict) else target)
    template = _CSR_TEMPLATES.get(key)
    if template is None:
        empty = CSRMatrix((1, 1), np.zeros(2, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32))
        template = _CSR_TEMPLATES[key] = compile_spmm(empty, feat, format="csr", target=target, dtype=dtype,
                                                      index_dtype="int32")
    return template


def _fresh_csr_kernel(matrix, feat: int, dtype: str, target) -> FreshCSR | None:
    """For a validated ``CSRMatrix``: its own int32 copies, for :class:`FreshCSR` (None where it does not apply)."""
    if dtype not in ("float32", "float64") or matrix.values.dtype.kind not in "fiub":
        return None
    (m, n), nnz = matrix.shape, int(matrix.indices.shape[0])
    if choose_index_dtype(m + 1, n + 1, nnz, m * feat, n * feat) != "int32":
        return None
    indptr = np.array(matrix.indptr, dtype=np.int32)  # copies: the kernel owns its structure
    indices = np.array(matrix.indices, dtype=np.int32)
    values = np.array(matrix.values, dtype=dtype)
    for array in (indptr, indices, values):
        array.flags.writeable = False
    return FreshCSR(indptr, indices, values, matrix.shape, feat, dtype, target)


def _build(csr, feat: int, format, target, dtype: str, transpose_a: bool, knobs: dict) -> Kernel:
    """The kernel for a structure not seen before: validated, then bound lean where it is plain CSR."""
    matrix = read_sparse_input(csr)
    if not knobs and not transpose_a and (format == "csr" or type(format) is CSR) and target == "llvm":
        kernel = _fresh_csr_kernel(matrix, feat, dtype, target)
        if kernel is not None:
            return kernel
    return compile_spmm(matrix, feat, format=format, target=target, dtype=dtype, transpose_a=transpose_a, **knobs)


def spmm(A, B, *, format="csr", target="llvm", out=None, transpose_a: bool = False, **knobs):
    """``A @ B`` for a sparse A and a dense B.

    Parameters
    ----------
    A : scipy.sparse matrix or torch sparse CSR/COO tensor
        Any layout (converted to CSR); its values are cast to B's dtype.
    B : numpy array or torch tensor
        Dense, ``(A.shape[1], feat)``.
    format, target, transpose_a, **knobs
        As for :func:`compile_spmm` (``transpose_a``: compute ``A^T @ B``).
    out : array, optional
        Written in place and returned.

    Returns
    -------
    numpy array or torch tensor
        ``A @ B`` (or ``A^T @ B``) with B's type and dtype. A torch B (without ``out=``) goes through
        ``torch.ops.sparsetir.spmm``: differentiable in B and in a torch A's values.
    """
    dtype = check_dense_operand(B, "B")
    if is_torch(B) and out is None:
        return SPMM.front_end("torch")(A, B, format=format, target=target, transpose_a=transpose_a, **knobs)
    csr = A.tocsr() if sp.issparse(A) and A.ndim == 2 else read_sparse_input(A)
    shape = tuple(int(s) for s in csr.shape)
    inner = shape[0] if transpose_a else shape[1]
    if B.shape[0] != inner:
        op = "A^T @ B needs B with A's rows" if transpose_a else "A @ B needs B with A's columns"
        raise ValueError(f"A is {shape[0]}x{shape[1]} but B has {B.shape[0]} rows ({op})")
    values = csr.data if sp.issparse(csr) else csr.values
    key = options_key("spmm", shape, int(B.shape[1]), dtype, np.dtype(values.dtype).str, format, target,
                      transpose_a, knobs)
    kernel = PREPARED.get(key, (csr.indptr, csr.indices, values),
                          lambda: _build(csr, int(B.shape[1]), format, target, dtype, transpose_a, knobs))
    return kernel(B, out=out)


SPMM = register_op(OpSpec("spmm", function=spmm_function, compile=compile_spmm, call=spmm, reference=SPMM_REFERENCE,
                          knobs={"cpu": {"vector_width": ..., "unroll": ..., "prefetch": ..., "specialize": ...,
                                         "horizontal_fuse": ..., "block_kernel": ...},
                                 "cuda": {"rows_per_block": ..., "lanes": ..., "specialize": ...}}))

__all__ = ["bind_csr_spmm", "choose_block_kernel", "compile_spmm", "spmm", "spmm_function", "tensor_core_block_function"]
