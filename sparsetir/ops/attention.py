"""Block-sparse attention, ``softmax(scale * Q K^T restricted to a block mask) V``, composed from the IR.

The mask's pattern is one sparse matrix: per head its ``(seq/block, seq/block)`` block layout
expanded to elements; a layout per head stacks the heads block-diagonally (``heads * seq``
rows), so one structure serves every head. Its format (``bsr``, ``dbsr``, ``srbcrs``, or plain
``csr``) rewrites the pattern's rows ``I`` and columns ``J`` into the format's loops, given by
the format's own rewrite rule (``Format.rewrite_rules``): block rows ``r0``, blocks ``c0``,
columns in a block ``c1`` and rows in a block ``r1``. Over those loops, Stage I is three
stages, the intermediates allocated by the kernel::

    G over batch x heads (a shared layout) or batch (a layout per head)
    Qt[g, r0, d, r1]  = Q[g, row, d]                                 # the query block, transposed
    S[g, r0, c0, c1, r1] += Qt[g, r0, d, r1] * K[g, col, d]          # block SDDMM  (d: "R")
    mx[g, r0, r1] = max(mx[g, r0, r1], S * scale)                    # row softmax: max ...
    S = exp(S * scale - mx)                                          #   ... exp in place ...
    sm[g, r0, r1] += S                                               #   ... and sum
    Oacc[g, r0, r1, d] += S * V[g, col, d]                           # block SpMM   (c0, c1: "R")
    O[g, row, d] = Oacc / sm  (0 where the row has no key)

NaN and Inf follow torch's SDPA (docs/nan-semantics.md): a NaN in a query row, or in a key or value
row that a query row attends to, makes that query row NaN; an infinite score does too (``exp(inf -
inf)``); a query row whose blocks are all masked is 0 (SDPA gives NaN there).

with ``row = r0 * block + r1`` and ``col = c0 * block + c1`` as the format's rule says. Slots a
format pads (a partial SR-BCRS group, a block past ``seq``) read the mask's value 0 and are left
out of the softmax (``masked``). The row-fused variant (knob ``fuse_rows``) computes all stages
under one loop over (g, r0) (``schedule.attention.fuse_row_nests``): each block row's scores
stay in a small per-row buffer and the full score matrix is never written.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..backend import compile_module, device_of, normalize_target
from ..backend.cache import index_lookup, index_store
from ..formats import parse_format
from ..formats.structure import SourceAxes
from ..ir import (
    SparseBuffer,
    SparseFunction,
    cast,
    dense_fixed,
    exp,
    size_var,
    sparse_iteration,
    sparse_variable,
    where,
)
from ..ir import max as ir_max
from ..lower import lower
from ..reference.sparse_attention import SPARSE_ATTENTION_REFERENCE, block_layout
from ..runtime.batched import BATCHED, BatchedKernel
from ..runtime.function import CompiledFunction
from ..runtime.marshal import is_torch
from ..runtime.validate import dtype_name
from ..schedule import schedule_attention
from ..schedule.attention import attention_settings
from ..transform import widen_accumulation
from .prepared import PREPARED, options_key
from .registry import OpSpec, register_op

DTYPES = ("float32", "float16", "bfloat16")
ATTENTION_FORMATS = ("bsr", "dbsr", "srbcrs", "csr")
_compiled: dict[tuple, CompiledFunction] = {}


# ------------------------------------------------------------------------------------------ format
def attention_format(format, block: int):
    """The format object for ``format`` with its block set to ``block``.

    ``"bsr"``/``"dbsr"`` take ``block``; ``"srbcrs"`` takes tiles of ``block`` rows and groups
    of ``block`` columns; explicit fields must agree (``"bsr:32"`` with ``block=16`` is a
    ``ValueError``); ``"csr"`` runs element by element.
    """
    explicit = isinstance(format, str) and ":" in format
    if isinstance(format, str) and format.strip().lower() == "srbcrs":
        format = f"srbcrs:{block}:{block}"
        explicit = False
    fmt = parse_format(format)
    if fmt.name not in ATTENTION_FORMATS:
        raise ValueError(f"sparse_attention runs in {', '.join(ATTENTION_FORMATS)}, not {format!r}")
    if "block" in fmt.param_names:
        if explicit or not isinstance(format, str):
            if fmt.block != block:
                raise ValueError(f"format {format!r} has blocks of {fmt.block}, but block={block}: give one block size")
        else:
            fmt = type(fmt)(block=block)
    return fmt


# ------------------------------------------------------------------------------------------ Stage I
@dataclass(frozen=True)
class FormatLoops:
    """The format's loops over the pattern, split by role: rows (``r0``, ``r1``) and columns (``c0``, ``c1``)."""

    rows: tuple
    cols: tuple
    coordinates: object  # {axis: iterator} -> {pattern rows axis: expr, pattern cols axis: expr}
    mask: object  # the pattern's value buffer in the format's layout
    pattern_rows: object
    pattern_cols: object

    @property
    def order(self) -> list:
        """``r0, c0, c1, r1``: a block row, its blocks, the columns of a block, then its rows."""
        return [self.rows[0], *self.cols, *self.rows[1:]]

    @property
    def row_order(self) -> list:
        return list(self.rows)

    def covers_rows(self) -> bool:
        """Whether the row loops visit every row of the pattern (else the output is zeroed first)."""
        return not any(axis.is_sparse for axis in self.rows)


class _KnownSizes(SourceAxes):
    """The pattern's axes with its sizes as constants: the kernel is compiled for one structure,
    so every bound is known (no guards) and only the batch stays a parameter."""

    def __init__(self, sizes: dict, *args):
        super().__init__(*args)
        self.sizes = sizes

    def size(self, name: str):
        from tvm import tirx  # noqa: PLC0415 - a constant of the index dtype

        return tirx.const(int(self.sizes[name]), self.idtype)


def format_loops(fmt, sizes: dict, idtype: str, device: str) -> FormatLoops:
    """The format's rewrite rule over the CSR pattern ``I x J`` of ``sizes``, as the loops attention iterates."""
    rows = dense_fixed("I", sizes["m"], idtype)
    cols = sparse_variable("J", rows, sizes["n"], sizes.get("nnz", 0))
    mask = SparseBuffer("A", (rows, cols), "float32")
    rules = fmt.rewrite_rules(_KnownSizes(sizes, rows, cols, [mask], "S", "R"), device)
    if not rules:
        return FormatLoops((rows,), (cols,), lambda v: {rows: v[rows], cols: v[cols]}, mask, rows, cols)
    if len(rules) != 1:
        raise ValueError(f"sparse_attention needs a format with one sub-format, not {fmt!r}")
    (rule,) = rules
    flat = [a for g in rule.axes for a in getattr(g, "axes", (g,))]
    row_axes = tuple(a for a, k in zip(flat, rule.kinds) if k == "S")
    col_axes = tuple(a for a, k in zip(flat, rule.kinds) if k == "R")
    if len(row_axes) != 2 or len(col_axes) != 2:
        raise ValueError(f"sparse_attention needs a format with block rows and blocks, not {fmt!r}")
    return FormatLoops(row_axes, col_axes, rule.coordinates, rule.buffers[mask], rows, cols)


def attention_function(fmt, head_dim: int, sizes: dict, *, dtype: str = "float32",
                       idtype: str = "int32", device: str = "cpu", scale: float | None = None,
                       masked: bool = False, transpose_q: bool | None = None,
                       probability_dtype: str | None = None) -> SparseFunction:
    """The Stage I block-sparse attention over ``fmt``'s loops (see the module docstring).

    Parameters
    ----------
    fmt : Format
        The pattern's format (one rewrite rule with row and column loops, or CSR).
    head_dim : int
        Columns of Q, K and V.
    sizes : dict
        The sizes of the pattern in ``fmt`` (``fmt.sizes(converted)``, with ``m``, ``n``, ``nnz``):
        compiled as constants; Q and O have ``m`` rows per ``g``, K and V ``n``.
    dtype : str
        Q, K, V and O; scores, softmax and the output accumulate in float32.
    scale : float
        Multiplies the scores (default ``1/sqrt(head_dim)``).
    masked : bool
        Leave slots whose mask value is 0 (a format's padding) out of the softmax.
    transpose_q : bool
        Read Q through a transposed copy of each query block (``Qt``), so the SDDMM runs along the
        rows of a block (default: on the CPU, for block formats).
    probability_dtype : str
        The dtype of the probabilities the SpMM reads (default float32; the CUDA tensor-core
        schedule reads them in the input dtype).
    """
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    loops = format_loops(fmt, sizes, idtype, device)
    q_rows, k_rows = int(sizes["m"]), int(sizes["n"])
    blocked = len(loops.rows) == 2
    transpose_q = (device == "cpu" and blocked) if transpose_q is None else bool(transpose_q and blocked)
    g = size_var("g", idtype)
    G = dense_fixed("Batch", g, idtype)
    QR, KR = dense_fixed("QR", q_rows, idtype), dense_fixed("KR", k_rows, idtype)
    D = dense_fixed("D", head_dim, idtype)
    Q, K, V = SparseBuffer("Q", (G, QR, D), dtype), SparseBuffer("K", (G, KR, D), dtype), SparseBuffer(
        "V", (G, KR, D), dtype)
    O = SparseBuffer("O", (G, QR, D), dtype)
    acc = "float32"
    layout = loops.mask.axes
    S = SparseBuffer("S", (G, *(_score_layout(loops, layout) if device == "cpu" else layout)), acc)
    P = S if probability_dtype in (None, acc) else SparseBuffer("P", S.axes, probability_dtype)
    mx = SparseBuffer("mx", (G, *loops.row_order), acc)
    sm = SparseBuffer("sm", (G, *loops.row_order), acc)
    Oacc = SparseBuffer("Oacc", (G, *loops.row_order, D), acc)
    order, rows = loops.order, loops.row_order
    kinds_rows_cols = "".join("S" if a in loops.rows else "R" for a in order)

    def coordinates(iters):
        return loops.coordinates(dict(zip(order, iters)))

    def score_index(gv, iters):
        by_axis = dict(zip(order, iters))
        return (gv, *(by_axis[a] for a in S.axes[1:]))

    def row_index(gv, iters):
        by_axis = dict(zip(order, iters))
        return (gv, *(by_axis[a] for a in rows))

    def valid(iters):
        mask_index = tuple(dict(zip(order, iters))[a] for a in layout)
        return loops.mask[mask_index] > 0.0

    iterations = []
    if not loops.covers_rows():
        @sparse_iteration([G, QR, D], "SSS", name="zero_rows")
        def zero_rows(gv, r, d):
            O[gv, r, d] = cast(0.0, dtype)

        iterations.append(zero_rows)
    scale_c = cast(scale, acc)
    if transpose_q:
        Qt = SparseBuffer("Qt", (G, rows[0], D, rows[1]), dtype)

        @sparse_iteration([G, rows[0], D, rows[1]], "SSSS", name="transpose_q")
        def transpose(gv, r0, d, r1):
            Qt[gv, r0, d, r1] = Q[gv, loops.coordinates({rows[0]: r0, rows[1]: r1, **_zero_cols(loops)})[
                loops.pattern_rows], d]

        iterations.append(transpose)

    @sparse_iteration([G, *order, D], "S" * (len(order) + 1) + "R", name="scores")
    def scores(*iters):
        gv, *pos, d = iters
        c = coordinates(pos)
        by_axis = dict(zip(order, pos))
        q = Qt[gv, by_axis[rows[0]], d, by_axis[rows[1]]] if transpose_q else Q[gv, c[loops.pattern_rows], d]
        q, key = cast(q, acc), cast(K[gv, c[loops.pattern_cols], d], acc)
        # the product in the order of the score tile's indices (a tensor-core tile multiplies in that order)
        S[score_index(gv, pos)] += key * q if S.axes[-1] in loops.rows else q * key

    @sparse_iteration([G, *order], "S" + kinds_rows_cols, name="rowmax")
    def rowmax(*iters):
        gv, *pos = iters
        value = S[score_index(gv, pos)] * scale_c
        if masked:
            value = where(valid(pos), value, cast(-math.inf, acc))
        mx[row_index(gv, pos)] = ir_max(mx[row_index(gv, pos)], value)

    @sparse_iteration([G, *order], "S" * (len(order) + 1), name="exponent")
    def exponent(*iters):
        gv, *pos = iters
        value = exp(S[score_index(gv, pos)] * scale_c - mx[row_index(gv, pos)])
        if masked:
            value = where(valid(pos), value, cast(0.0, acc))
        P[score_index(gv, pos)] = cast(value, P.dtype)

    @sparse_iteration([G, *order], "S" + kinds_rows_cols, name="rowsum")
    def rowsum(*iters):
        gv, *pos = iters
        sm[row_index(gv, pos)] += cast(P[score_index(gv, pos)], acc)

    @sparse_iteration([G, *order, D], "S" + kinds_rows_cols + "S", name="aggregate")
    def aggregate(*iters):
        gv, *pos, d = iters
        c = coordinates(pos)
        Oacc[(*row_index(gv, pos), d)] += cast(P[score_index(gv, pos)], acc) * cast(V[gv, c[loops.pattern_cols], d],
                                                                                     acc)

    @sparse_iteration([G, *rows, D], "S" * (len(rows) + 2), name="normalise")
    def normalise(*iters):
        gv, *pos, d = iters
        row = loops.coordinates({**dict(zip(rows, pos)), **_zero_cols(loops)})[loops.pattern_rows]
        total = sm[(gv, *pos)]
        # a row with no key gives 0; a NaN total (a NaN or an infinite score in the row) stays NaN, as in SDPA
        O[gv, row, d] = cast(where(total == 0.0, cast(0.0, acc), Oacc[(gv, *pos, d)] / total), dtype)

    iterations += [scores, rowmax, exponent, rowsum, aggregate, normalise]
    params = [Q, K, V, O] + ([loops.mask] if masked else [])
    return SparseFunction("sparse_attention", iterations, params=params)


def _score_layout(loops: FormatLoops, layout) -> tuple:
    """The scores' axes on the CPU: the format's value layout with the rows in a block last
    (``r0, c0, c1, r1``), so the softmax runs along a block's rows in vectors. On CUDA the scores
    keep the format's layout (a block row-major, as the tensor cores' fragments store it)."""
    if len(loops.rows) == 1:
        return tuple(layout)
    inner = loops.rows[1]
    return (*(a for a in layout if a is not inner), inner)


def _zero_cols(loops: FormatLoops) -> dict:
    """Column iterators set to 0, for a rule's coordinate map asked only for rows."""
    from tvm import tirx  # noqa: PLC0415 - a constant of the axes' index dtype

    return {a: tirx.const(0, a.idtype) for a in loops.cols}


# ------------------------------------------------------------------------------------------ host side
@dataclass
class AttentionStructure:
    """A block layout as the sparse pattern a kernel is compiled for, in its format."""

    layout: np.ndarray  # (q_blocks, k_blocks) or (heads, q_blocks, k_blocks), bool
    block: int
    seq_q: int
    seq_k: int
    fmt: object
    converted: object
    sizes: dict
    bound: dict  # the kernel's structure arrays (and the mask's values, when masked)
    masked: bool
    convert_s: float

    @property
    def heads(self) -> int | None:
        """The heads of a layout per head; None for one shared by all heads."""
        return int(self.layout.shape[0]) if self.layout.ndim == 3 else None

    @property
    def padded(self) -> tuple[int, int]:
        """Rows of Q and of K the kernel reads per head: the layout's blocks times ``block``."""
        return self.layout.shape[-2] * self.block, self.layout.shape[-1] * self.block


def block_pattern(layout: np.ndarray, block: int, seq_k: int) -> sp.csr_matrix:
    """The element pattern of a block layout: every element of every kept block, heads stacked
    block-diagonally, without the key columns past ``seq_k`` (vectorised; values 1)."""
    heads = layout.shape[0] if layout.ndim == 3 else 1
    per_head = layout.reshape(heads, *layout.shape[-2:])
    blocks = sp.block_diag([sp.csr_matrix(h) for h in per_head], format="csr") if heads > 1 else sp.csr_matrix(
        per_head[0])
    blocks.sort_indices()
    degree = np.diff(blocks.indptr).astype(np.int64)
    columns = (blocks.indices.astype(np.int64)[:, None] * block + np.arange(block)).reshape(-1)
    k_padded = layout.shape[-1] * block
    keep = columns % k_padded < seq_k
    kept_before = np.concatenate([[0], np.cumsum(keep)])  # kept columns before each position
    row_start = kept_before[blocks.indptr[:-1] * block]
    row_length = kept_before[blocks.indptr[1:] * block] - row_start
    columns = columns[keep]
    lengths = np.repeat(row_length, block)
    starts = np.repeat(row_start, block)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    offsets = np.arange(indptr[-1], dtype=np.int64) - np.repeat(indptr[:-1], lengths)
    indices = columns[np.repeat(starts, lengths) + offsets]
    del degree
    shape = (blocks.shape[0] * block, blocks.shape[1] * block)
    return sp.csr_matrix((np.ones(indices.shape[0], np.float32), indices, indptr), shape=shape)


def prepare_structure(layout, block: int, format, *, seq_q: int | None = None, seq_k: int | None = None,
                      device: str = "cpu", index_dtype: str = "int32") -> AttentionStructure:
    """Validate ``layout`` and convert its pattern to ``format`` (timed as conversion)."""
    started = time.perf_counter()
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block must be an int >= 1, got {block!r}")
    block = int(block)
    fmt = attention_format(format, block)
    layout = block_layout(layout)
    q_padded, k_padded = layout.shape[-2] * block, layout.shape[-1] * block
    seq_q = q_padded if seq_q is None else int(seq_q)
    seq_k = k_padded if seq_k is None else int(seq_k)
    for name, seq, padded in (("query", seq_q, q_padded), ("key", seq_k, k_padded)):
        if not padded - block < seq <= padded:
            raise ValueError(f"the layout has {padded // block} {name} blocks of {block}, so the {name} sequence must "
                             f"have {padded - block + 1}..{padded} rows, got {seq}")
    pattern = block_pattern(layout, block, seq_k)
    converted = fmt.convert(pattern, dtype="float32", index_dtype=index_dtype)
    sizes = fmt.sizes(converted)
    sizes.setdefault("nnz", int(pattern.nnz))
    mask_name = format_loops(fmt, sizes, index_dtype, device).mask.name
    bound = _bind(fmt, converted, mask_name, device)
    masked = any((np.asarray(p) < 0).any() for p in converted.slot_positions().values()) \
        if hasattr(converted, "slot_positions") else False
    if not masked:
        bound.pop(mask_name, None)
    return AttentionStructure(layout, block, seq_q, seq_k, fmt, converted, sizes, bound, masked,
                              time.perf_counter() - started)


def _bind(fmt, converted, mask_name: str, device: str) -> dict:
    """The kernel's structure parameters, with the pattern's values (1, or 0 in padding) as ``mask_name``."""
    bound = fmt.bind(converted, ["A"], device)
    if "A" in bound:  # CSR: the values keep their name
        return bound
    suffix = mask_name[len("A"):]
    return {name: array for name, array in bound.items() if not name.startswith("A_") or name == f"A{suffix}"}


# ------------------------------------------------------------------------------------------ compile
def compile_sparse_attention(layout, head_dim, *, block: int = 16, format="bsr", dtype="float32", target="llvm",
                             scale: float | None = None, seq: int | None = None, index_dtype: str = "int32",
                             **knobs) -> BatchedKernel:
    """Compile block-sparse attention for one block layout.

    Parameters
    ----------
    layout : numpy array, torch tensor or scipy sparse matrix
        Boolean blocks ``(seq/block, seq/block)`` shared by every head, or ``(heads, seq/block,
        seq/block)`` one per head (the heads are then stacked into one pattern).
    head_dim : int
        The last dimension of q, k and v.
    block : int
        The layout's block size.
    format : str or Format
        ``"bsr"``, ``"dbsr"``, ``"srbcrs"`` (tiles and groups of ``block``; ``"srbcrs:t:g"`` for
        others) or ``"csr"``; ``"bsr:N"`` with ``N != block`` is a ``ValueError``.
    dtype : str
        ``"float32"``, ``"float16"`` or ``"bfloat16"`` (scores, softmax and sums in float32).
    target : str or dict
        ``"llvm"``, ``"cuda"`` or a TVM target dict.
    scale : float, optional
        The scores' factor (default ``1/sqrt(head_dim)``).
    seq : int or (int, int), optional
        Rows of q (and of k and v) when the block does not divide them (default: the layout's
        blocks times ``block``); the padded key columns are left out of the softmax.
    **knobs
        ``fuse_rows``, ``row_tile``, ``score_tile`` (CPU), ``tensor_cores`` (CUDA); see
        ``sparsetir.schedule.attention``.

    Returns
    -------
    BatchedKernel
        Called as ``kernel(q, k, v, out=None)`` with ``(batch, heads, seq, head_dim)`` operands of
        ``dtype`` (numpy or torch); ``.source``, ``.export(path)``, ``.timings`` (conversion and
        compile seconds); ``sparsetir.runtime.load`` of an export returns the same callable.
    """
    head_dim = _positive(head_dim, "head_dim")
    target = normalize_target(target)
    device = device_of(target)
    dtype = str(dtype).replace("torch.", "")
    if dtype not in DTYPES:
        raise TypeError(f"sparse_attention runs in {', '.join(DTYPES)}, not {dtype}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0
                              or not math.isfinite(scale)):
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    settings = attention_settings(device, knobs)
    seq_q, seq_k = (seq, seq) if not isinstance(seq, tuple) else seq
    structure = prepare_structure(layout, block, format, seq_q=seq_q, seq_k=seq_k, device=device,
                                  index_dtype=index_dtype)
    started = time.perf_counter()
    function = _compiled_attention(structure, head_dim, dtype, index_dtype, target, device, scale, settings)
    compile_s = time.perf_counter() - started
    q_padded, k_padded = structure.padded
    spec = {"op": "sparse_attention", "format": repr(structure.fmt), "dtype": dtype, "inputs": ["Q", "K", "V"],
            "outputs": ["O"], "block": structure.block, "scale": scale,
            BATCHED: {"size": "g", "heads": structure.heads, "dim": head_dim,
                      "rows": {"Q": [structure.seq_q, q_padded], "K": [structure.seq_k, k_padded],
                               "V": [structure.seq_k, k_padded], "O": [structure.seq_q, q_padded]}}}
    sizes = {}
    kernel = BatchedKernel(function, spec, _owned(structure.bound), sizes, structure.layout)
    kernel.timings = {"convert_s": structure.convert_s, "compile_s": compile_s}
    kernel.structure = structure
    return kernel


def _positive(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def _owned(bound: dict) -> dict:
    """The structure arrays, read-only (the kernel owns them)."""
    out = {}
    for name, array in bound.items():
        array = np.ascontiguousarray(array)
        array.flags.writeable = False
        out[name] = array
    return out


def _compiled_attention(structure: AttentionStructure, head_dim: int, dtype: str, idtype: str, target: dict,
                        device: str, scale, settings: dict) -> CompiledFunction:
    """The compiled function for the structure's sizes (and, for the row-fused variant, its longest
    row), cached in the process and, through the on-disk index, across processes."""
    fingerprint = ""
    if settings.get("fuse_rows"):
        digest = hashlib.sha256()
        for name in sorted(structure.bound):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(structure.bound[name]).tobytes())
        fingerprint = digest.hexdigest()
    probability = dtype if device == "cuda" and settings.get("tensor_cores") and dtype != "float32" else None
    key = ("sparse_attention", structure.fmt.structure_key(), json.dumps(structure.sizes, sort_keys=True), head_dim,
           dtype, idtype, json.dumps(target, sort_keys=True), json.dumps(settings, sort_keys=True), structure.masked,
           repr(scale), fingerprint)
    if key not in _compiled:
        library = index_lookup(*key)
        if library is not None:
            _compiled[key] = CompiledFunction(library)
        else:
            mod = scheduled_attention(structure, head_dim, dtype=dtype, idtype=idtype, device=device, scale=scale,
                                      probability_dtype=probability, settings=settings)
            _compiled[key] = compile_module(mod, target)
            index_store(_compiled[key].library, *key)
    return _compiled[key]


def scheduled_attention(structure: AttentionStructure, head_dim: int, *, dtype: str = "float32",
                        idtype: str = "int32", device: str = "cpu", scale: float | None = None,
                        probability_dtype: str | None = None, settings: dict | None = None):
    """The Stage I function for ``structure``, lowered and scheduled for ``device`` (an IRModule)."""
    settings = attention_settings(device, settings or {})
    if probability_dtype is None and device == "cuda" and settings.get("tensor_cores") and dtype != "float32":
        probability_dtype = dtype
    func = attention_function(structure.fmt, head_dim, structure.sizes, dtype=dtype, idtype=idtype, device=device,
                              scale=scale, masked=structure.masked, probability_dtype=probability_dtype)
    prim = lower(widen_accumulation(func))
    return schedule_attention(prim, device, structure=structure.bound, **settings)


# ------------------------------------------------------------------------------------------ the op
def sparse_attention(q, k, v, layout, *, block: int = 16, format="bsr", scale: float | None = None, out=None,
                     target="llvm", **knobs):
    """Block-sparse attention: ``softmax(scale * q k^T on the layout's blocks) v``, per head.

    Parameters
    ----------
    q, k, v : numpy arrays or torch tensors
        ``(batch, heads, seq, head_dim)``, float32, float16 or bfloat16 (one dtype and type);
        accumulation is in float32.
    layout : numpy array, torch tensor or scipy sparse matrix
        A boolean block mask ``(seq/block, seq/block)`` shared by the heads, or ``(heads,
        seq/block, seq/block)`` per head. A query row whose blocks are all masked gives zeros.
    block : int
        The layout's block size (q's rows need not be a multiple: the last block is partial).
    format : str or Format
        ``"bsr"``, ``"dbsr"`` or ``"srbcrs"`` (or ``"csr"``); its block is ``block``.
    scale : float, optional
        Default ``1/sqrt(head_dim)``; the softmax subtracts each row's max.
    out : array, optional
        Written in place and returned.
    target, **knobs
        As for :func:`compile_sparse_attention`.

    Returns
    -------
    numpy array or torch tensor
        O, of q's type, dtype and shape.
    """
    for name, array in (("q", q), ("k", k), ("v", v)):
        if not (isinstance(array, np.ndarray) or is_torch(array)):
            raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(array).__name__}")
        if len(array.shape) != 4:
            raise ValueError(f"{name} must be (batch, heads, seq, head_dim), got shape {tuple(array.shape)}")
    dtype = dtype_name(q)
    if dtype_name(k) != dtype or dtype_name(v) != dtype:
        raise TypeError(f"q, k and v must share a dtype, got {dtype}, {dtype_name(k)} and {dtype_name(v)}")
    if dtype not in DTYPES:
        raise TypeError(f"sparse_attention runs in {', '.join(DTYPES)}, not {dtype}")
    blocks = block_layout(layout)  # the structure, by content: a layout seen before reuses its kernel
    seq = (int(q.shape[2]), int(k.shape[2]))
    key = options_key("sparse_attention", int(q.shape[3]), block, format, dtype, target, scale, seq, knobs)
    kernel = PREPARED.get(key, (blocks,), lambda: compile_sparse_attention(
        blocks, int(q.shape[3]), block=block, format=format, dtype=dtype, target=target, scale=scale, seq=seq,
        **knobs))
    return kernel(q, k, v, out=out)


SPARSE_ATTENTION = register_op(OpSpec(
    "sparse_attention", function=attention_function, compile=compile_sparse_attention, call=sparse_attention,
    reference=SPARSE_ATTENTION_REFERENCE, default_format="bsr",
    knobs={"cpu": {"fuse_rows": ..., "row_tile": ..., "score_tile": ...},
           "cuda": {"fuse_rows": ..., "tensor_cores": ...}}))

__all__ = ["attention_function", "compile_sparse_attention", "prepare_structure", "scheduled_attention",
           "sparse_attention"]
