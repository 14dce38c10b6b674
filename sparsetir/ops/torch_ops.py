"""PyTorch custom ops: ``torch.ops.sparsetir.spmm``, ``sddmm`` and ``edge_index_to_csr``.

Importing ``sparsetir.ops`` registers them with ``torch.library``. Each has a fake (meta)
kernel, so ``torch.compile(model, fullgraph=True)`` traces through it without a graph break;
``spmm`` and ``sddmm`` have autograd formulas and an autocast rule. The sparse structure is
given as dense index tensors (CSR ``indptr`` and ``indices``), which the compiler can trace;
torch sparse tensors cannot be traced by torch.compile, so :func:`spmm_torch` and
:func:`sddmm_torch` (what ``sparsetir.ops.spmm``/``sddmm`` call for torch inputs) may break the
graph for them.

Signatures (every sparse matrix ``A`` is ``indptr`` (rows + 1), ``indices`` (nnz) and
``values`` (nnz), with ``num_cols`` columns)::

    spmm(indptr, indices, values, B, num_cols, transpose_a=False, format="csr", knobs="", target="")
        -> A @ B, or A^T @ B; B's dtype
    sddmm(indptr, indices, values, X, Y, format="csr", knobs="", target="")
        -> values[p] * (X[i] . Y[j]) for every stored entry p = (i, j), in A's order; X's dtype
    edge_index_to_csr(edge_index, num_rows) -> (indptr, indices, perm)
        the CSR of the (2, E) edge list read as adj_t: row = edge_index[1] (target),
        column = edge_index[0] (source); entry p is edge perm[p] (a stable sort by target)

``format`` is a format string (``"csr"``, ``"hyb:8"``, ``"auto"``, ...), ``knobs`` a JSON object
of knobs (``""``: none), ``target`` ``"llvm"``, ``"cuda"`` or a JSON target dict (``""``: from the
tensors' device).

Gradients (each through these same ops, so they are differentiable again):

- SpMM ``C = A @ B``: ``dB = A^T @ dC`` (``transpose_a``, whose transposed structure is built
  once and cached with the kernel) and ``dvalues = SDDMM(A's pattern, dC, B)``.
- SDDMM ``out = values * (X[i] . Y[j])``: ``dvalues = SDDMM(A, X, Y)`` with ``dout`` as values,
  ``dX = A' @ Y`` and ``dY = A'^T @ X`` with ``A' = values * dout`` on A's pattern.

Under ``torch.autocast`` the floating inputs (float64 excepted) are cast to the autocast dtype
(bfloat16 on the CPU by default), and the kernels accumulate half types in float32.

Kernels are cached per structure. A structure is matched first by identity (the same index
tensor objects, unmodified: their version counters), then by content (``torch.equal`` against
the cached copy), so a full-graph model pays one validation and conversion per structure and
mini-batches (a fresh structure each) pay only validation, conversion and binding: the compiled
code is reused. The cache owns copies of the structures it holds (writing into an index tensor
through ``.numpy()`` or ``.data`` bypasses the version counter; the content check still sees it
when the tensor object is new, not when it is the same object).
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from ..formats import CSRMatrix, parse_format, read_sparse_input
from ..formats.matrix import INT32_LIMIT
from ..runtime.validate import check_indices, check_indptr, dtype_name
from .sddmm import SDDMM, compile_sddmm
from .spmm import SPMM, bind_csr_spmm, compile_spmm

__all__ = ["CACHED_STRUCTURES", "adopt", "canonical_order", "clear_cache", "format_string", "sample_structure",
           "sddmm_torch", "spmm_torch", "stats"]

#: How many structures (with their kernels) the cache holds, least recently used dropped first.
CACHED_STRUCTURES = 24
VALUE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# --- the structure cache -------------------------------------------------------------------------

@dataclass
class _Structure:
    """One validated CSR structure, owned (host copy), with the kernels compiled for it."""

    rows: int
    cols: int
    device: torch.device
    matrix: CSRMatrix  # owned host arrays (int32 where the sizes fit, else int64), validated, read-only
    reference: tuple  # (indptr, indices) on ``device``, for content checks
    seen: tuple = ()  # weak references and versions of the tensors last matched
    kernels: dict = field(default_factory=dict)
    canonical: tuple | None = None  # (canonical CSRMatrix, map or None) for SDDMM
    transposed: tuple | None = None  # (A^T as CSRMatrix, order: entry p of A^T is entry order[p] of A)
    permuted: tuple = ()  # the values last permuted into A^T's order: (ref, version, copy, permuted)
    extras: dict = field(default_factory=dict)  # what other ops derive from this structure (torch_rgms.py)
    sampled: bool = False  # valid by construction (sample_structure), never validated

    def same_objects(self, indptr: Tensor, indices: Tensor) -> bool:
        if not self.seen:
            return False
        ref_ptr, version_ptr, ref_idx, version_idx = self.seen
        return (ref_ptr() is indptr and ref_idx() is indices and indptr._version == version_ptr
                and indices._version == version_idx)

    def remember(self, indptr: Tensor, indices: Tensor) -> None:
        self.seen = (weakref.ref(indptr), indptr._version, weakref.ref(indices), indices._version)


class _Stats:
    def __init__(self):
        self.reset()

    def reset(self):
        self.hits = self.misses = self.kernels = 0
        self.compile_s = self.convert_s = self.validate_s = 0.0

    def as_dict(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "kernels": self.kernels, "compile_s": self.compile_s,
                "convert_s": self.convert_s, "validate_s": self.validate_s}


_STATS = _Stats()
_LOCK = threading.RLock()
_STRUCTURES: OrderedDict[int, _Structure] = OrderedDict()
_EDGE_LISTS: OrderedDict[int, tuple] = OrderedDict()  # edge_index -> CSR conversions, same policy


def stats() -> dict:
    """Counters since the last :func:`clear_cache`: structure hits and misses, kernels bound, and
    the seconds spent compiling, converting and validating (the benchmark's compile column)."""
    return _STATS.as_dict()


def clear_cache() -> None:
    """Forget every cached structure and kernel, and reset :func:`stats` (compiled code stays cached)."""
    with _LOCK:
        _STRUCTURES.clear()
        _EDGE_LISTS.clear()
        _STATS.reset()


def _host_index(tensor: Tensor) -> np.ndarray:
    """An owned int64 host copy of an index tensor."""
    return np.array(tensor.detach().to("cpu", torch.int64).numpy(), dtype=np.int64, copy=True)


def _structure(indptr: Tensor, indices: Tensor, num_cols: int) -> _Structure:
    """The cached record of this structure, validating and converting it on a miss."""
    rows, nnz = indptr.shape[0] - 1, indices.shape[0]
    with _LOCK:
        candidates = [(key, s) for key, s in reversed(_STRUCTURES.items())
                      if s.rows == rows and s.cols == num_cols and s.matrix.nnz == nnz and s.device == indptr.device]
        for key, record in candidates:
            if record.same_objects(indptr, indices):
                _STRUCTURES.move_to_end(key)
                _STATS.hits += 1
                return record
        for key, record in candidates:
            ref_ptr, ref_idx = record.reference
            if (ref_ptr.dtype == indptr.dtype and ref_idx.dtype == indices.dtype and torch.equal(ref_ptr, indptr)
                    and torch.equal(ref_idx, indices)):
                record.remember(indptr, indices)
                _STRUCTURES.move_to_end(key)
                _STATS.hits += 1
                return record
        started = time.perf_counter()
        host_ptr, host_idx = _host_index(indptr), _host_index(indices)
        check_indptr(host_ptr, name="indptr", rows=rows, nnz=nnz)
        check_indices(host_idx, name="indices", length=num_cols)
        narrow = max(rows + 1, nnz, num_cols) <= INT32_LIMIT  # int32, the kernels' index dtype, where it fits
        matrix = CSRMatrix((rows, num_cols), _read_only(host_ptr, narrow), _read_only(host_idx, narrow),
                           np.ones(nnz, np.float32))
        reference = (_content_copy(indptr, host_ptr, matrix.indptr), _content_copy(indices, host_idx, matrix.indices))
        record = _Structure(rows, num_cols, indptr.device, matrix, reference)
        record.remember(indptr, indices)
        _STATS.validate_s += time.perf_counter() - started
        _STATS.misses += 1
        key = id(record)
        _STRUCTURES[key] = record
        while len(_STRUCTURES) > CACHED_STRUCTURES:
            _STRUCTURES.popitem(last=False)
        return record


def _content_copy(tensor: Tensor, *owned: np.ndarray) -> Tensor:
    """A copy of ``tensor``'s content for later comparisons: on the CPU, a view of one of the validated host copies
    ``owned`` of its dtype (no third copy of a large index array), else a clone."""
    if tensor.device.type == "cpu":
        for array in owned:
            if array.dtype.name == dtype_name(tensor):
                return _read_only_tensors(array)[0]
    return tensor.detach().clone()


def _read_only(array: np.ndarray, narrow: bool) -> np.ndarray:
    """A validated index array, in int32 when ``narrow``, read-only."""
    if narrow and array.dtype != np.int32:
        array = array.astype(np.int32)
    array.flags.writeable = False
    return array


def sample_structure(indptr: np.ndarray, indices: np.ndarray, num_cols: int) -> tuple[Tensor, Tensor, _Structure]:
    """A structure valid by construction (``nn.NeighborSampler``'s blocks): ``(indptr, indices, proof)``.

    ``indptr``/``indices`` (numpy, int32 where the sizes fit) must already be a valid CSR with
    ``num_cols`` columns: the caller built them (the sampler's cumulative sums and local ids), so
    they are not validated. The proof holds its own copies with A^T (a linear counting sort) and
    the order of A's entries in it; :func:`adopt` gives it to the ops for the two tensors returned,
    as long as they are those objects, unmodified (their version counters). Anything else (a user's
    tensors, an edited block) is validated as usual.
    """
    rows, nnz = indptr.shape[0] - 1, indices.shape[0]
    if indptr.ndim != 1 or indices.ndim != 1 or int(indptr[-1]) != nnz:
        raise ValueError("sample_structure needs a CSR (indptr ending at the number of indices)")
    own_ptr, own_idx = np.array(indptr, copy=True), np.array(indices, copy=True)
    positions = sp.csr_matrix((np.arange(nnz, dtype=np.int64), own_idx, own_ptr), shape=(rows, num_cols)).tocsc()
    t_ptr = positions.indptr.astype(own_ptr.dtype, copy=False)
    t_idx = positions.indices.astype(own_idx.dtype, copy=False)
    for array in (own_ptr, own_idx, t_ptr, t_idx):
        array.flags.writeable = False
    proof = _Structure(rows, num_cols, torch.device("cpu"), CSRMatrix((rows, num_cols), own_ptr, own_idx,
                       np.ones(nnz, np.float32)), _read_only_tensors(own_ptr, own_idx), sampled=True)
    proof.transposed = (CSRMatrix((num_cols, rows), t_ptr, t_idx, np.ones(nnz, np.float32)),
                        torch.from_numpy(np.asarray(positions.data, dtype=np.int64)))
    user_ptr, user_idx = torch.from_numpy(indptr), torch.from_numpy(indices)
    proof.remember(user_ptr, user_idx)
    return user_ptr, user_idx, proof


def _read_only_tensors(*arrays: np.ndarray) -> tuple:
    import warnings  # noqa: PLC0415 - only here

    with warnings.catch_warnings():  # torch shares the (read-only) memory; the record only reads it
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return tuple(torch.from_numpy(a) for a in arrays)


def adopt(proof, indptr: Tensor, indices: Tensor) -> bool:
    """Give the ops a :func:`sample_structure` proof for these tensors; True when it applies (the
    same tensor objects, unmodified since sampling). A proof for other or edited tensors is ignored:
    the ops then validate them like any structure."""
    if not (type(proof) is _Structure and proof.sampled and proof.same_objects(indptr, indices)):
        return False
    with _LOCK:
        key = id(proof)
        if key not in _STRUCTURES:
            _STRUCTURES[key] = proof
            while len(_STRUCTURES) > CACHED_STRUCTURES:
                _STRUCTURES.popitem(last=False)
        _STRUCTURES.move_to_end(key)
    return True


def canonical_order(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The canonical CSR (rows sorted, duplicates merged) of a structure, and ``map``: entry ``p``
    of the given structure is entry ``map[p]`` of the canonical one (``None`` when it already is)."""
    indptr, indices = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
    rows = indptr.shape[0] - 1
    degrees = np.diff(indptr)
    row_of = np.repeat(np.arange(rows, dtype=np.int64), degrees)
    if indices.size < 2:
        return indptr, indices, None
    step = np.diff(indices)
    boundary = row_of[1:] != row_of[:-1]
    if bool(np.all((step > 0) | boundary)):
        return indptr, indices, None
    order = np.lexsort((indices, row_of))
    sorted_idx, sorted_rows = indices[order], row_of[order]
    first = np.ones(indices.size, dtype=bool)
    first[1:] = (sorted_idx[1:] != sorted_idx[:-1]) | (sorted_rows[1:] != sorted_rows[:-1])
    ids = np.cumsum(first) - 1
    mapping = np.empty(indices.size, dtype=np.int64)
    mapping[order] = ids
    canon_ptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(sorted_rows[first], minlength=rows), out=canon_ptr[1:])
    return canon_ptr, sorted_idx[first], mapping


def _canonical(record: _Structure) -> tuple:
    if record.canonical is None:
        matrix = record.matrix
        ptr, idx, mapping = canonical_order(matrix.indptr, matrix.indices)
        canon = matrix if mapping is None else CSRMatrix(matrix.shape, ptr, idx, np.ones(idx.shape[0], np.float32))
        record.canonical = (canon, mapping)
    return record.canonical


def _target_of(target: str, device: torch.device):
    if target:
        return json.loads(target) if target.lstrip().startswith("{") else target
    return "cuda" if device.type == "cuda" else "llvm"


def _transposed(record: _Structure) -> tuple:
    """A^T as CSR, and ``order``: entry p of A^T is entry order[p] of A. scipy's CSR -> CSC conversion
    (a linear-time counting sort, stable, duplicates kept) carries the entry numbers as its values:
    about ten times faster than the argsort of ``formats.matrix.transpose``, which matters when
    every mini-batch is a new structure."""
    if record.transposed is None:
        matrix = record.matrix
        rows, cols = matrix.shape
        positions = sp.csr_matrix((np.arange(matrix.nnz, dtype=np.int64), matrix.indices, matrix.indptr),
                                  shape=(rows, cols)).tocsc()
        order = np.asarray(positions.data, dtype=np.int64)
        transposed = CSRMatrix((cols, rows), positions.indptr.astype(matrix.indptr.dtype),
                               positions.indices.astype(matrix.indices.dtype), np.ones(matrix.nnz, np.float32))
        record.transposed = (transposed, torch.from_numpy(order).to(record.device))
    return record.transposed


def _kernel(record: _Structure, op: str, feat: int, dtype: torch.dtype, transpose_a: bool, fmt: str, knobs: str,
            target: str, device: torch.device):
    """The kernel for (op, feat, dtype, ...) bound to this structure (A^T's for ``transpose_a``)."""
    key = (op, feat, dtype, transpose_a, fmt, knobs, target)
    kernel = record.kernels.get(key)
    if kernel is not None:
        return kernel
    with _LOCK:  # one compile per key, also when autograd or a data loader calls from other threads
        kernel = record.kernels.get(key)
        if kernel is not None:
            return kernel
        options = json.loads(knobs) if knobs else {}
        dtype_name = str(dtype).replace("torch.", "")
        kernel = _bound_csr_kernel(record, op, feat, dtype_name, transpose_a, fmt, options, target, device)
        if kernel is None and op == "spmm":
            started = time.perf_counter()
            matrix = _transposed(record)[0] if transpose_a else record.matrix
            transpose_s = time.perf_counter() - started
            kernel = compile_spmm(matrix, feat, format=fmt, target=_target_of(target, device), dtype=dtype_name,
                                  **options)
            kernel.timings["convert_s"] += transpose_s
        elif kernel is None:
            kernel = compile_sddmm(_canonical(record)[0], feat, format=fmt, target=_target_of(target, device),
                                   dtype=dtype_name, **options)
        _STATS.kernels += 1
        _STATS.compile_s += kernel.timings.get("compile_s", 0.0)
        _STATS.convert_s += kernel.timings.get("convert_s", 0.0)
        record.kernels[key] = kernel
    return kernel


def _bound_csr_kernel(record: _Structure, op: str, feat: int, dtype: str, transpose_a: bool, fmt: str,
                      options: dict, target: str, device: torch.device):
    """A CSR SpMM kernel bound to the record's own (validated or sampled) int32 arrays
    (``spmm.bind_csr_spmm``: one compiled function per (feat, dtype, target), no conversion or copy
    per structure). None where that does not apply (another op or format, knobs, int64 sizes)."""
    if op != "spmm" or fmt.strip().lower() != "csr" or options or device.type != "cpu":
        return None
    matrix = _transposed(record)[0] if transpose_a else record.matrix
    if matrix.indptr.dtype != np.int32 or matrix.indices.dtype != np.int32:
        return None
    values = np.ones(matrix.nnz, np.float32)  # a placeholder: the custom op passes the values on every call
    return bind_csr_spmm(matrix.indptr, matrix.indices, values, matrix.shape, feat, dtype=dtype,
                         target=_target_of(target, device))


def _kernel_values(kernel, values: Tensor, record: _Structure | None = None) -> Tensor:
    """Values as the kernel takes them. For A^T's kernel (``record`` given): permuted into A^T's order,
    the permutation kept while the same values (same object unmodified, or equal) come back, as
    they do in every backward pass of a model with fixed edge weights. A format that spreads values
    over slots does so through numpy, which has no bfloat16 (float32 then, rounded to the kernel's
    dtype there)."""
    values = values.detach()
    if record is not None:
        values = _permuted(record, values)
    if kernel.layout is not None and values.dtype == torch.bfloat16:
        return values.float()
    return values


def _permuted(record: _Structure, values: Tensor) -> Tensor:
    with _LOCK:
        return _permuted_locked(record, values)


def _permuted_locked(record: _Structure, values: Tensor) -> Tensor:
    if record.permuted:
        ref, version, copy, permuted = record.permuted
        if (ref() is values and values._version == version) or (
                copy.dtype == values.dtype and copy.device == values.device and torch.equal(copy, values)):
            record.permuted = (weakref.ref(values), values._version, copy, permuted)
            return permuted
    permuted = torch.index_select(values, 0, _transposed(record)[1])  # not values[order]: ~100x slower here
    record.permuted = (weakref.ref(values), values._version, values.clone(), permuted)
    return permuted


# --- shared checks (the real and the fake kernels run them, so tracing fails as early) ---------

def _check_structure(indptr: Tensor, indices: Tensor, values: Tensor, num_cols: int) -> None:
    for name, tensor in (("indptr", indptr), ("indices", indices)):
        if tensor.dim() != 1:
            raise ValueError(f"{name} must be 1-D, got shape {tuple(tensor.shape)}")
        if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
            raise TypeError(f"{name} must have an integer dtype, got {tensor.dtype}")
    if values.dim() != 1 or values.shape[0] != indices.shape[0]:
        raise ValueError(f"values must be 1-D with one entry per index ({indices.shape[0]}), "
                         f"got shape {tuple(values.shape)}")
    if values.dtype not in VALUE_DTYPES:
        raise TypeError(f"values has dtype {values.dtype}; supported: {', '.join(map(str, VALUE_DTYPES))}")
    if num_cols < 0:
        raise ValueError(f"num_cols must be >= 0, got {num_cols}")


def _check_dense(tensor: Tensor, name: str, rows, what: str) -> None:
    if tensor.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(tensor.shape)}")
    if tensor.dtype not in VALUE_DTYPES:
        raise TypeError(f"{name} has dtype {tensor.dtype}; supported: {', '.join(map(str, VALUE_DTYPES))}")
    if tensor.shape[0] != rows:
        raise ValueError(f"{name} has {tensor.shape[0]} rows, expected {rows} ({what})")


def _check_devices(*tensors: Tensor) -> None:
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError(f"all tensors must be on one device, got {sorted(map(str, devices))}")


# --- spmm ----------------------------------------------------------------------------------------

def _spmm_checks(indptr, indices, values, B, num_cols, transpose_a) -> int:
    _check_structure(indptr, indices, values, num_cols)
    rows = indptr.shape[0] - 1
    inner, what = (rows, "A^T @ B needs B with A's rows") if transpose_a else (num_cols, "A @ B needs B with A's columns")
    _check_dense(B, "B", inner, what)
    _check_devices(indptr, indices, values, B)
    return num_cols if transpose_a else rows


@torch.library.custom_op("sparsetir::spmm", mutates_args=())
def _spmm(indptr: Tensor, indices: Tensor, values: Tensor, B: Tensor, num_cols: int, transpose_a: bool = False,
          format: str = "csr", knobs: str = "", target: str = "") -> Tensor:
    _spmm_checks(indptr, indices, values, B, num_cols, transpose_a)
    record = _structure(indptr, indices, num_cols)
    kernel = _kernel(record, "spmm", int(B.shape[1]), B.dtype, transpose_a, format, knobs, target, B.device)
    return kernel(B.detach(), values=_kernel_values(kernel, values, record if transpose_a else None))


@_spmm.register_fake
def _spmm_fake(indptr, indices, values, B, num_cols, transpose_a=False, format="csr", knobs="", target=""):
    rows = _spmm_checks(indptr, indices, values, B, num_cols, transpose_a)
    return B.new_empty((rows, B.shape[1]))


def _spmm_setup(ctx, inputs, output):
    indptr, indices, values, B, num_cols, transpose_a, fmt, knobs, target = inputs
    ctx.save_for_backward(indptr, indices, values, B)
    ctx.options = (num_cols, transpose_a, fmt, knobs, target)


def _spmm_backward(ctx, grad):
    indptr, indices, values, B = ctx.saved_tensors
    num_cols, transpose_a, fmt, knobs, target = ctx.options
    d_values = d_B = None
    if ctx.needs_input_grad[2]:
        X, Y = (B, grad) if transpose_a else (grad, B)
        ones = torch.ones(values.shape, dtype=grad.dtype, device=grad.device)
        sddmm_format, sddmm_knobs = _format_for("sddmm", fmt, knobs)
        d_values = torch.ops.sparsetir.sddmm(indptr, indices, ones, X.contiguous(), Y.contiguous(), sddmm_format,
                                             sddmm_knobs, target).to(values.dtype)
    if ctx.needs_input_grad[3]:
        d_B = torch.ops.sparsetir.spmm(indptr, indices, values, grad.contiguous(), num_cols, not transpose_a, fmt,
                                       knobs, target)
    return None, None, d_values, d_B, None, None, None, None, None


_spmm.register_autograd(_spmm_backward, setup_context=_spmm_setup)


# --- sddmm ---------------------------------------------------------------------------------------

def _sddmm_checks(indptr, indices, values, X, Y) -> None:
    _check_dense(Y, "Y", Y.shape[0] if Y.dim() == 2 else -1, "")
    _check_structure(indptr, indices, values, Y.shape[0])
    _check_dense(X, "X", indptr.shape[0] - 1, "one per row of A")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must have the same number of columns, got {X.shape[1]} and {Y.shape[1]}")
    if X.dtype != Y.dtype:
        raise TypeError(f"X and Y must share a dtype, got {X.dtype} and {Y.dtype}")
    _check_devices(indptr, indices, values, X, Y)


@torch.library.custom_op("sparsetir::sddmm", mutates_args=())
def _sddmm(indptr: Tensor, indices: Tensor, values: Tensor, X: Tensor, Y: Tensor, format: str = "csr",
           knobs: str = "", target: str = "") -> Tensor:
    _sddmm_checks(indptr, indices, values, X, Y)
    record = _structure(indptr, indices, int(Y.shape[0]))
    kernel = _kernel(record, "sddmm", int(X.shape[1]), X.dtype, False, format, knobs, target, X.device)
    mapping = _canonical(record)[1]
    if mapping is None:
        return kernel(X.detach(), Y.detach(), values=_kernel_values(kernel, values))
    products = kernel(X.detach(), Y.detach())  # per canonical entry, the kernel's bound values being ones
    gathered = torch.index_select(products, 0, torch.as_tensor(mapping, device=products.device))
    return gathered * values.detach().to(products.dtype)


@_sddmm.register_fake
def _sddmm_fake(indptr, indices, values, X, Y, format="csr", knobs="", target=""):
    _sddmm_checks(indptr, indices, values, X, Y)
    return X.new_empty((indices.shape[0],))


def _sddmm_setup(ctx, inputs, output):
    indptr, indices, values, X, Y, fmt, knobs, target = inputs
    ctx.save_for_backward(indptr, indices, values, X, Y)
    ctx.options = (fmt, knobs, target)


def _sddmm_backward(ctx, grad):
    indptr, indices, values, X, Y = ctx.saved_tensors
    fmt, knobs, target = ctx.options
    d_values = d_X = d_Y = None
    grad = grad.contiguous()
    if ctx.needs_input_grad[2]:
        d_values = torch.ops.sparsetir.sddmm(indptr, indices, grad, X, Y, fmt, knobs, target).to(values.dtype)
    if ctx.needs_input_grad[3] or ctx.needs_input_grad[4]:
        weights = values.to(grad.dtype) * grad
        spmm_format, spmm_knobs = _format_for("spmm", fmt, knobs)
        if ctx.needs_input_grad[3]:
            d_X = torch.ops.sparsetir.spmm(indptr, indices, weights, Y, Y.shape[0], False, spmm_format, spmm_knobs,
                                           target)
        if ctx.needs_input_grad[4]:
            d_Y = torch.ops.sparsetir.spmm(indptr, indices, weights, X, Y.shape[0], True, spmm_format, spmm_knobs,
                                           target)
    return None, None, d_values, d_X, d_Y, None, None, None


_sddmm.register_autograd(_sddmm_backward, setup_context=_sddmm_setup)


def _format_for(op: str, fmt: str, knobs: str) -> tuple[str, str]:
    """The format (and knobs) a backward pass of another op runs in: the same format where that op
    supports it (``auto`` stays ``auto``), else CSR; knobs belong to the forward op and are dropped."""
    if fmt.strip().lower() == "auto":
        return fmt, ""
    return (fmt if parse_format(fmt).supports(op) else "csr"), ""


# --- edge_index -> CSR (adj_t) -------------------------------------------------------------------

@torch.library.custom_op("sparsetir::edge_index_to_csr", mutates_args=())
def _edge_index_to_csr(edge_index: Tensor, num_rows: int) -> tuple[Tensor, Tensor, Tensor]:
    _check_edge_index(edge_index, num_rows)
    indptr, indices, perm = _converted_edge_index(edge_index, num_rows)
    device = edge_index.device
    return (torch.from_numpy(indptr).to(device, copy=True), torch.from_numpy(indices).to(device, copy=True),
            torch.from_numpy(perm).to(device, copy=True))


@_edge_index_to_csr.register_fake
def _edge_index_to_csr_fake(edge_index, num_rows):
    _check_edge_index(edge_index, num_rows)
    edges = edge_index.shape[1]
    return (edge_index.new_empty((num_rows + 1,), dtype=torch.int64), edge_index.new_empty((edges,), dtype=torch.int64),
            edge_index.new_empty((edges,), dtype=torch.int64))


def _check_edge_index(edge_index: Tensor, num_rows: int) -> None:
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
    if edge_index.dtype.is_floating_point or edge_index.dtype.is_complex or edge_index.dtype == torch.bool:
        raise TypeError(f"edge_index must have an integer dtype, got {edge_index.dtype}")
    if num_rows < 0:
        raise ValueError(f"num_rows must be >= 0, got {num_rows}")


def _converted_edge_index(edge_index: Tensor, num_rows: int) -> tuple:
    """(indptr, indices, perm) of adj_t, cached by the edge list's identity, then its content."""
    with _LOCK:
        for key, (ref, version, rows, copy, converted) in reversed(_EDGE_LISTS.items()):
            if rows == num_rows and ((ref() is edge_index and edge_index._version == version) or (
                    copy.shape == edge_index.shape and copy.dtype == edge_index.dtype
                    and copy.device == edge_index.device and torch.equal(copy, edge_index))):
                _EDGE_LISTS[key] = (weakref.ref(edge_index), edge_index._version, rows, copy, converted)
                _EDGE_LISTS.move_to_end(key)
                return converted
        started = time.perf_counter()
        host = _host_index(edge_index.reshape(-1)).reshape(2, -1)
        sources, targets = host[0], host[1]
        if targets.size and (targets.min() < 0 or targets.max() >= num_rows):
            bad = int(np.argmax((targets < 0) | (targets >= num_rows)))
            raise ValueError(f"edge_index[1, {bad}] = {targets[bad]} is not a node id below num_rows={num_rows}")
        if sources.size and sources.min() < 0:
            bad = int(np.argmax(sources < 0))
            raise ValueError(f"edge_index[0, {bad}] = {sources[bad]} is negative")
        perm = np.argsort(targets, kind="stable")
        indptr = np.zeros(num_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(targets, minlength=num_rows), out=indptr[1:])
        converted = (indptr, sources[perm], perm.astype(np.int64))
        copy = edge_index.detach().clone()
        key = id(copy)
        _EDGE_LISTS[key] = (weakref.ref(edge_index), edge_index._version, num_rows, copy, converted)
        while len(_EDGE_LISTS) > CACHED_STRUCTURES:
            _EDGE_LISTS.popitem(last=False)
        _STATS.convert_s += time.perf_counter() - started
        return converted


# --- autocast: floating inputs in the autocast dtype, then the op with autocast off -------------

def _autocast_rule(op, device_type: str):
    def kernel(_keyset, *args):
        dtype = torch.get_autocast_dtype(device_type)
        cast = [a.to(dtype) if isinstance(a, Tensor) and a.is_floating_point() and a.device.type == device_type
                and a.dtype != torch.float64 else a for a in args]
        with torch.autocast(device_type, enabled=False):
            return op(*cast)
    return kernel


_AUTOCAST = torch.library.Library("sparsetir", "FRAGMENT")
for _name in ("spmm", "sddmm"):
    for _device, _key in (("cpu", "AutocastCPU"), ("cuda", "AutocastCUDA")):
        _AUTOCAST.impl(_name, _autocast_rule(getattr(torch.ops.sparsetir, _name).default, _device), _key,
                       with_keyset=True)


# --- what sparsetir.ops.spmm / sddmm call for torch inputs ---------------------------------------

def format_string(fmt) -> str:
    """A format (string or object) as the string the custom ops take."""
    if isinstance(fmt, str):
        return fmt
    parts = [type(fmt).name]
    params = list(fmt.params())
    while params and params[-1] is None:
        params.pop()
    for value in params:
        parts.append(",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value))
    text = ":".join(parts)
    if parse_format(text) != fmt:
        raise TypeError(f"format {fmt!r} has no format string; pass a string such as 'csr' or 'hyb:8'")
    return text


def _options(format, target, knobs: dict) -> tuple[str, str, str]:
    target_text = "" if target is None else (target if isinstance(target, str) else json.dumps(target, sort_keys=True))
    return format_string(format), (json.dumps(knobs, sort_keys=True) if knobs else ""), target_text


def _torch_sparse_csr(A):
    """(indptr, indices, values, shape) of a torch sparse CSR or COO tensor, values differentiable."""
    if A.layout == torch.sparse_coo:
        A = A.coalesce().to_sparse_csr()
    if A.layout != torch.sparse_csr:
        raise TypeError(f"a torch A must be a sparse CSR (or COO) tensor, got layout {A.layout}")
    if A.dim() != 2:
        raise ValueError(f"A must be 2-D, got {A.dim()}-D")
    return A.crow_indices(), A.col_indices(), A.values(), tuple(A.shape)


def _operand_structure(A, dtype: torch.dtype, device: torch.device, canonical: bool):
    """(indptr, indices, values, shape) of A for the custom ops; values in ``dtype``."""
    if type(A).__module__.startswith("torch"):
        indptr, indices, values, shape = _torch_sparse_csr(A)
        if values.dtype.is_complex:
            raise TypeError(f"A has dtype {values.dtype}, which cannot be cast to {dtype}")
        if canonical:
            ptr, idx, mapping = canonical_order(_host_index(indptr), _host_index(indices))
            if mapping is not None:
                merged = torch.zeros(idx.shape[0], dtype=values.dtype, device=values.device)
                values = merged.index_add(0, torch.as_tensor(mapping, device=values.device), values)
                indptr, indices = torch.from_numpy(ptr).to(indptr.device), torch.from_numpy(idx).to(indptr.device)
        return indptr.to(device), indices.to(device), values.to(device, dtype), shape
    matrix = read_sparse_input(A, canonical=canonical)
    values = np.asarray(matrix.values)
    if values.dtype.kind not in "fiub":
        raise TypeError(f"A has dtype {values.dtype}, which cannot be cast to {str(dtype).replace('torch.', '')}")
    host = values.astype(np.float64 if dtype == torch.float64 else np.float32, copy=False)
    return (torch.from_numpy(np.asarray(matrix.indptr)).to(device), torch.from_numpy(np.asarray(matrix.indices)).to(device),
            torch.from_numpy(host).to(device, dtype), matrix.shape)


def spmm_torch(A, B: Tensor, *, format="csr", target=None, transpose_a: bool = False, **knobs) -> Tensor:
    """``A @ B`` (or ``A^T @ B``) for a torch B, through ``torch.ops.sparsetir.spmm``: differentiable in
    B and in a torch A's values. ``target=None`` (or ``"llvm"`` for a CPU B): from B's device."""
    if not isinstance(transpose_a, bool):
        raise TypeError(f"transpose_a must be True or False, got {transpose_a!r}")
    if B.dtype not in VALUE_DTYPES:
        raise TypeError(f"B has dtype {B.dtype}; supported: {', '.join(map(str, VALUE_DTYPES))}")
    indptr, indices, values, (m, n) = _operand_structure(A, B.dtype, B.device, canonical=False)
    inner = m if transpose_a else n
    if B.shape[0] != inner:
        op = "A^T @ B needs B with A's rows" if transpose_a else "A @ B needs B with A's columns"
        raise ValueError(f"A is {m}x{n} but B has {B.shape[0]} rows ({op})")
    fmt, knob_text, target_text = _options(format, _explicit_target(target, B.device), knobs)
    return torch.ops.sparsetir.spmm(indptr, indices, values, B, n, transpose_a, fmt, knob_text, target_text)


def sddmm_torch(A, X: Tensor, Y: Tensor, *, format="csr", target=None, **knobs):
    """SDDMM on A's canonical pattern for torch X and Y, through ``torch.ops.sparsetir.sddmm``:
    a torch sparse CSR result whose values are differentiable in X, Y and a torch A's values."""
    indptr, indices, values, (m, n) = _operand_structure(A, X.dtype, X.device, canonical=True)
    if X.shape[0] != m or Y.shape[0] != n:
        raise ValueError(f"A is {m}x{n}, so X needs {m} rows and Y {n} rows; got {X.shape[0]} and {Y.shape[0]}")
    fmt, knob_text, target_text = _options(format, _explicit_target(target, X.device), knobs)
    out = torch.ops.sparsetir.sddmm(indptr, indices, values, X, Y, fmt, knob_text, target_text)
    return torch.sparse_csr_tensor(indptr.detach().to(torch.int64, copy=True),
                                   indices.detach().to(torch.int64, copy=True), out, size=(m, n))


# ops.spmm / ops.sddmm hand torch operands to these (OpSpec.front_end), so they never import this module
SPMM.register_front_end("torch", spmm_torch)
SDDMM.register_front_end("torch", sddmm_torch)

def _explicit_target(target, device: torch.device):
    """None where the device decides (the default 'llvm' of a CPU tensor included)."""
    if target is None or (target == "llvm" and device.type == "cpu") or (target == "cuda" and device.type == "cuda"):
        return None
    return target

