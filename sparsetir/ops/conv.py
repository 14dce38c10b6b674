"""Sparse 3-D convolution on point clouds: voxelisation, kernel maps, and the convolution as RGMS.

A sparse convolution computes, for every active output voxel ``q``,
``Y[q] = sum_k sum_{p : p = in(q, k)} X[p] @ W[k]``: each kernel offset ``k`` pairs some input
voxels with some output voxels. :func:`kernel_map` finds those pairs once per point cloud and
layer geometry (as spconv's ``indice_key`` caches them), grouped by offset. The convolution is
then relational gather-matmul-scatter (:func:`~sparsetir.ops.rgms`): relation ``k`` is offset
``k`` and ``A_k[out, in] = 1``. So the dataflows are rgms formats: ``csf`` (output rows
outermost: output-stationary, parallel, no atomics, the default) and ``relcsr``/``ell3d``
(offsets outermost: gather-GEMM-scatter, one offset's weights reused over all of its pairs),
and ``format="auto"`` lets the tuner choose per layer.

Geometry (per axis, spconv's ``SubMConv3d`` and ``SparseConv3d(kernel_size, stride,
padding=kernel_size // 2, dilation)``): with kernel index ``a`` in ``0 .. kernel_size - 1`` and
``offset = a - kernel_size // 2``, input ``p`` feeds output ``q`` when

* submanifold (stride 1): ``p = q + offset * dilation``, and the outputs are the inputs;
* otherwise: ``p = q * stride - padding + a * dilation`` with ``padding = kernel_size // 2``,
  for every ``q`` in ``0 .. out_shape - 1``,
  ``out_shape = (shape + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1``
  (``shape``: the grid's ``spatial_shape``); the outputs are the ``q`` that receive a pair.

Duplicate input coordinates are separate points at one voxel (as a dense grid that sums them):
each one feeds every output its voxel feeds, and in a submanifold map each one is an output.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import hooks
from ..backend import device_of, normalize_target
from ..formats import parse_format
from ..formats.relational import RelationalMatrix, read_relational_input
from ..reference.conv import CONV_REFERENCE
from ..runtime.marshal import is_torch
from ..schedule.staged import STAGED_KNOBS
from .operands import check_dense_operand
from .prepared import PREPARED
from .registry import OpSpec, check_feat, register_op
from .rgms import compile_rgms, default_format, rgms_feature_args, rgms_function

__all__ = ["KernelMap", "compile_sparse_conv3d", "kernel_map", "sparse_conv3d", "voxelize"]

#: rgms knobs a convolution uses unless told otherwise: per-pair products (every (output, offset)
#: has one input, so aggregating first saves nothing) with the output features innermost
#: (vectorised, one row of W_k per input feature), much faster than a dot product per output.
CONV_KNOBS = {"dataflow": "edge", "feature_loops": "lk"}
DEFAULT_FORMAT = "csf"
_KEY_LIMIT = 1 << 62  # voxel keys are int64: batch and padded grid volume must fit below this
#: The largest voxel coordinate (spconv's int32 grid): voxelize's results and kernel_map's inputs stay at or below it,
#: so coordinates, their kernel offsets and the grid's extent never leave int64 (a float that cannot be an integer
#: is a ValueError, not -2**63).
MAX_COORDINATE = (1 << 31) - 1


# ---------------------------------------------------------------- validation


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def _host_array(array, name: str) -> np.ndarray:
    """A numpy view or copy of a numpy array or torch tensor (CPU)."""
    if is_torch(array):
        return array.detach().cpu().numpy()
    if type(array).__module__ == "numpy" and hasattr(array, "shape"):
        return np.asarray(array)
    raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(array).__name__}")


def _check_coords(coords) -> np.ndarray:
    """``(N, 4)`` integer (batch, x, y, z), all non-negative, as int64."""
    array = _host_array(coords, "coords")
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"coords must be integers (int32 or int64), got {array.dtype}")
    if array.ndim != 2 or array.shape[1] != 4:
        raise ValueError(f"coords must be (N, 4): batch, x, y, z per point, got shape {array.shape}")
    array = array.astype(np.int64, copy=False)
    if array.shape[0]:
        low = array.min(axis=0)
        if low[0] < 0:
            raise ValueError(f"coords: batch indices must be >= 0, got {int(low[0])}")
        if (low[1:] < 0).any():
            raise ValueError(f"coords: voxel coordinates must be >= 0 (spconv's grid starts at 0), got minimum "
                             f"{low[1:].tolist()}; shift them, e.g. coords[:, 1:] -= coords[:, 1:].min(0)")
        high = array.max(axis=0)
        if (high > MAX_COORDINATE).any():
            raise ValueError(f"coords: batch indices and voxel coordinates must be <= {MAX_COORDINATE} (an int32 grid, "
                             f"as spconv's), got maximum {high.tolist()}")
    return array


def _spatial_shape(spatial_shape, coords: np.ndarray) -> np.ndarray:
    top = coords[:, 1:].max(axis=0) + 1 if coords.shape[0] else np.ones(3, np.int64)
    if spatial_shape is None:
        return top.astype(np.int64)
    shape = np.asarray(spatial_shape)
    if shape.shape != (3,) or not np.issubdtype(shape.dtype, np.integer):
        raise TypeError(f"spatial_shape must be three ints, got {spatial_shape!r}")
    if (shape < top).any():
        raise ValueError(f"spatial_shape {shape.tolist()} does not hold the coordinates (largest + 1: {top.tolist()})")
    return shape.astype(np.int64)


def kernel_offsets(kernel_size: int) -> np.ndarray:
    """``(kernel_size**3, 3)`` offsets ``a - kernel_size // 2``, x slowest (spconv's weight order)."""
    a = np.arange(kernel_size, dtype=np.int64) - kernel_size // 2
    grid = np.stack(np.meshgrid(a, a, a, indexing="ij"), axis=-1)
    return grid.reshape(-1, 3)


# ---------------------------------------------------------------- the kernel map


@dataclass(eq=False)
class KernelMap:
    """Which input feeds which output through which kernel offset (see the module docstring).

    Attributes
    ----------
    out_coords : (M, 4) int64
        Output voxels (batch, x, y, z): the input coordinates for a submanifold map, else sorted.
    offsets : (K, 3) int64
        Kernel offsets ``a - kernel_size // 2``, x slowest; ``weight[k]`` goes with ``offsets[k]``.
    in_idx, out_idx : (P,) int64
        The pairs (input row, output row), grouped by offset, each group sorted by output then input.
    indptr : (K + 1,) int64
        Offset ``k``'s pairs are ``indptr[k]:indptr[k + 1]``.
    num_inputs : int
        Rows of the input features (N).
    kernel_size, stride, dilation, padding : int
        The layer's geometry; ``padding`` is 0 for a submanifold map, else ``kernel_size // 2``.
    submanifold : bool
        Whether the outputs are the inputs.
    spatial_shape, out_spatial_shape : (3,) int64
        The input and output grids' extents.
    build_s : float
        Seconds :func:`kernel_map` took.
    """

    out_coords: np.ndarray
    offsets: np.ndarray
    in_idx: np.ndarray
    out_idx: np.ndarray
    indptr: np.ndarray
    num_inputs: int
    kernel_size: int
    stride: int
    dilation: int
    padding: int
    submanifold: bool
    spatial_shape: np.ndarray
    out_spatial_shape: np.ndarray
    build_s: float = 0.0
    _relational: RelationalMatrix | None = field(default=None, repr=False)

    @property
    def num_outputs(self) -> int:
        return int(self.out_coords.shape[0])

    @property
    def num_offsets(self) -> int:
        return int(self.offsets.shape[0])

    @property
    def num_pairs(self) -> int:
        return int(self.in_idx.shape[0])

    def pairs(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(in_idx, out_idx)`` of offset ``k``."""
        lo, hi = int(self.indptr[k]), int(self.indptr[k + 1])
        return self.in_idx[lo:hi], self.out_idx[lo:hi]

    def relational(self) -> RelationalMatrix:
        """The map as rgms's relational input: relation ``k`` is offset ``k``, ``A_k[out, in] = 1``
        (``(M, N)`` relations, relation-major CSR; built once)."""
        if self._relational is None:
            M, K = self.num_outputs, self.num_offsets
            relation = np.repeat(np.arange(K, dtype=np.int64), np.diff(self.indptr))
            indptr = np.zeros(K * M + 1, dtype=np.int64)
            np.cumsum(np.bincount(relation * M + self.out_idx, minlength=K * M), out=indptr[1:])
            self._relational = RelationalMatrix((M, self.num_inputs), K, indptr, self.in_idx,
                                                np.ones(self.num_pairs, dtype=np.float32))
        return self._relational

    def __repr__(self) -> str:
        kind = "submanifold" if self.submanifold else f"stride {self.stride}"
        return (f"KernelMap({self.num_inputs} -> {self.num_outputs} voxels, {self.num_offsets} offsets, "
                f"{self.num_pairs} pairs; kernel {self.kernel_size}, {kind}, dilation {self.dilation})")


def kernel_map(coords, *, kernel_size: int = 3, stride: int = 1, dilation: int = 1, submanifold: bool = True,
               spatial_shape=None) -> KernelMap:
    """The kernel map of a sparse 3-D convolution over voxel coordinates.

    Parameters
    ----------
    coords : (N, 4) int numpy array or torch tensor
        Batch, x, y, z of every input point; all non-negative (int32 or int64). Duplicates are
        separate points at one voxel (see the module docstring).
    kernel_size, stride, dilation : int
        The layer's geometry (cubic kernels).
    submanifold : bool
        With stride 1: the outputs are the inputs (spconv ``SubMConv3d``); ``False`` gives a
        regular convolution (``SparseConv3d``, padding ``kernel_size // 2``). A stride above 1 is
        always a regular convolution.
    spatial_shape : three ints, optional
        The input grid's extent per axis (default: the largest coordinate + 1); a regular
        convolution's output grid is derived from it, as spconv does.

    Returns
    -------
    KernelMap
        Output coordinates and the (input, output) pairs grouped by offset. Build it once per
        point cloud and geometry and pass it to every layer that shares them.
    """
    started = time.perf_counter()
    kernel_size = _positive_int(kernel_size, "kernel_size")
    stride = _positive_int(stride, "stride")
    dilation = _positive_int(dilation, "dilation")
    if not isinstance(submanifold, (bool, np.bool_)):
        raise TypeError(f"submanifold must be True or False, got {submanifold!r}")
    submanifold = bool(submanifold) and stride == 1
    if submanifold and kernel_size % 2 == 0:
        raise ValueError(f"a submanifold convolution needs an odd kernel_size (a centre), got {kernel_size}")
    points = _check_coords(coords)
    shape = _spatial_shape(spatial_shape, points)
    offsets = kernel_offsets(kernel_size)
    if submanifold:
        out_coords, in_idx, out_idx, indptr = _submanifold_pairs(points, shape, offsets, dilation)
        padding, out_shape = 0, shape.copy()
    else:
        padding = kernel_size // 2
        out_shape = (shape + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1
        if (out_shape < 1).any():
            raise ValueError(f"the output grid {out_shape.tolist()} is empty: spatial_shape {shape.tolist()} is too "
                             f"small for kernel_size {kernel_size} with dilation {dilation}")
        out_coords, in_idx, out_idx, indptr = _strided_pairs(points, shape, out_shape, kernel_size, stride, dilation,
                                                            padding)
    return KernelMap(out_coords, offsets, in_idx, out_idx, indptr, int(points.shape[0]), kernel_size, stride,
                     dilation, padding, submanifold, shape, out_shape, time.perf_counter() - started)


def _grid(extent: np.ndarray, batches: int) -> np.ndarray:
    """Multipliers of the voxel key ``((b * e0 + x) * e1 + y) * e2 + z`` (int64, overflow checked)."""
    volume = int(batches)
    for e in extent.tolist():
        volume *= int(e)
        if volume >= _KEY_LIMIT:
            raise ValueError(f"the grid ({batches} batches x {extent.tolist()}) has over 2**62 voxels; "
                             "voxel keys would overflow int64")
    return np.array([extent[0] * extent[1] * extent[2], extent[1] * extent[2], extent[2], 1], dtype=np.int64)


def _unique_voxels(keys: np.ndarray):
    """Sorted distinct keys, each point's voxel, and the points of every voxel: voxel ``u`` holds points
    ``members[start[u]:start[u + 1]]`` (ascending)."""
    if keys.size and np.all(keys[1:] > keys[:-1]):  # sorted and distinct already (voxelize's and our outputs)
        identity = np.arange(keys.size, dtype=np.int64)
        return keys, identity, np.arange(keys.size + 1, dtype=np.int64), identity
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    first = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]] if keys.size else np.zeros(0, bool)
    voxel = np.empty(keys.size, dtype=np.int64)
    voxel[order] = np.cumsum(first) - 1
    start = np.r_[np.flatnonzero(first), keys.size].astype(np.int64)
    return sorted_keys[first], voxel, start, order


def _expand(pair_a: np.ndarray, pair_b: np.ndarray, start: np.ndarray, members: np.ndarray, expand_a: bool):
    """Replace voxel ids by their points: ``pair_b``'s always, ``pair_a``'s too when ``expand_a``; one pair
    per combination of points, in the pairs' order, then ``a``'s points, then ``b``'s."""
    count_b = start[pair_b + 1] - start[pair_b]
    count_a = start[pair_a + 1] - start[pair_a] if expand_a else np.ones_like(count_b)
    total = count_a * count_b
    which = np.repeat(np.arange(pair_a.size), total)
    within = np.arange(which.size) - np.repeat(np.cumsum(total) - total, total)
    b = members[start[pair_b[which]] + within % count_b[which]]
    a = members[start[pair_a[which]] + within // count_b[which]] if expand_a else pair_a[which]
    return a, b


def _lookup_pairs(queries: np.ndarray, unique: np.ndarray, kernel_size: int, dilation: int, mult: np.ndarray,
                  count: int | None = None):
    """For sorted query keys (each output's first input position, ``a = 0``) and sorted distinct input
    keys: ``(out, in)`` positions per kernel index, in kernel order, each sorted by output (the first
    ``count`` kernel indices only, when given).

    One binary search per (a_x, a_y) column; the ``a_z`` inputs of a column are consecutive keys,
    found by walking along z: the first key at or above ``q + t + 1`` is the one at or above
    ``q + t``, moved on by one where that was ``q + t`` itself (the keys are distinct)."""
    last = unique.size - 1
    count = kernel_size ** 3 if count is None else count
    pairs = []
    for ax in range(kernel_size):
        for ay in range(kernel_size):
            if len(pairs) >= count:
                return pairs[:count]
            column = queries + (ax * dilation) * mult[1] + (ay * dilation) * mult[2]
            position = np.searchsorted(unique, column)
            for t in range((kernel_size - 1) * dilation + 1):
                found = np.minimum(position, last)
                hit = unique[found] == column + t
                if t % dilation == 0:
                    out = np.flatnonzero(hit)
                    pairs.append((out, found[out]))
                position += hit
    return pairs[:count]


def _concatenate(ins: list, outs: list, K: int):
    indptr = np.zeros(K + 1, dtype=np.int64)
    np.cumsum([a.size for a in ins], out=indptr[1:])
    return np.concatenate(ins).astype(np.int64, copy=False), np.concatenate(outs).astype(np.int64, copy=False), indptr


def _empty_pairs(K: int):
    return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(K + 1, np.int64)


def _submanifold_pairs(points, shape, offsets, dilation):
    """The outputs are the inputs: output ``q`` meets input ``q + (a - kernel_size // 2) * dilation``.

    Keys live in a grid padded by the kernel's reach, so a shifted key never wraps into another
    row or batch. Pairs found between distinct voxels are then mapped to points."""
    n, K = points.shape[0], offsets.shape[0]
    if n == 0:
        return (points.copy(), *_empty_pairs(K))
    kernel_size = round(K ** (1 / 3))
    reach = (kernel_size // 2) * dilation
    mult = _grid(shape + 2 * reach, int(points[:, 0].max()) + 1)
    shift = reach * int(mult[1:].sum())
    unique, voxel, start, members = _unique_voxels(points @ mult + shift)
    # offset -o pairs the same voxels as +o, swapped: search the first half, mirror the second (an
    # offset's inputs come out ascending, so a mirrored list is sorted by output already)
    centre = K // 2
    found = _lookup_pairs(unique - shift, unique, kernel_size, dilation, mult, count=centre)
    identity = np.arange(unique.size, dtype=np.int64)
    found += [(identity, identity)] + [(inside, outside) for outside, inside in reversed(found)]
    ins, outs = [], []
    if unique.size < n:  # duplicates: every point of the input voxel feeds every point of the output voxel
        for out_voxel, in_voxel in found:
            in_point, out_point = _expand(in_voxel, out_voxel, start, members, expand_a=True)
            order = np.lexsort((in_point, out_point))
            ins.append(in_point[order])
            outs.append(out_point[order])
    elif np.all(members[1:] > members[:-1]):  # sorted input: voxel u is point u
        outs, ins = (list(side) for side in zip(*found))
    else:  # one point per voxel, in another order: sort each offset's pairs by output point
        for out_voxel, in_voxel in found:
            partner = np.full(n, -1, dtype=np.int64)
            partner[out_voxel] = in_voxel
            partner = partner[voxel]  # point order
            out_point = np.flatnonzero(partner >= 0)
            ins.append(members[partner[out_point]])
            outs.append(out_point)
    return (points.copy(), *_concatenate(ins, outs, K))


def _distinct_sorted(keys: np.ndarray, volume: int) -> np.ndarray:
    """The distinct keys in ``[0, volume)``, ascending: marked in a bitmap of the grid where that is small
    next to the keys (a linear pass), else sorted (numpy's hashing ``np.unique`` is slower than both)."""
    if volume <= 32 * keys.size:
        seen = np.zeros(volume, dtype=bool)
        seen[keys] = True
        return np.flatnonzero(seen).astype(np.int64, copy=False)
    keys.sort()
    return keys[np.r_[True, keys[1:] != keys[:-1]]] if keys.size else keys


def _strided_pairs(points, shape, out_shape, kernel_size, stride, dilation, padding):
    """Output ``q`` meets input ``q * stride - padding + a * dilation``; the outputs are the ``q`` inside
    the output grid that meet at least one input, all found from the inputs' side."""
    K = kernel_size ** 3
    n = points.shape[0]
    if n == 0:
        return (np.zeros((0, 4), np.int64), *_empty_pairs(K))
    batches = int(points[:, 0].max()) + 1
    in_mult = _grid(shape, batches)
    unique, voxel, start, members = _unique_voxels(points @ in_mult)
    voxels = points[members[start[:-1]]]  # one point of every distinct voxel, in key order
    # the outputs: per axis and kernel index, q = (p + padding - a * dilation) / stride where that is whole
    out_mult = _grid(out_shape, batches)
    a = np.arange(kernel_size, dtype=np.int64)[:, None]
    ok, part = [], []
    for axis in range(3):
        target = voxels[None, :, 1 + axis] + padding - a * dilation  # (ks, U)
        if stride & (stride - 1) == 0:  # a power of two: shifts instead of integer division
            q, whole = target >> (stride.bit_length() - 1), (target & (stride - 1)) == 0
        else:
            q, remainder = np.divmod(target, stride)
            whole = remainder == 0
        ok.append(whole & (target >= 0) & (q < out_shape[axis]))
        part.append(q * out_mult[1 + axis])
    base = voxels[:, 0] * out_mult[0]
    sources, targets = [], []  # per kernel index: the input voxels that meet an output, and its key
    for ax in range(kernel_size):
        for ay in range(kernel_size):
            xy_ok = ok[0][ax] & ok[1][ay]
            xy = base + part[0][ax] + part[1][ay]
            for az in range(kernel_size):
                source = np.flatnonzero(xy_ok & ok[2][az])
                sources.append(source)
                targets.append(xy[source] + part[2][az][source])
    keys = np.concatenate(targets)
    out_keys = _distinct_sorted(keys.copy(), batches * int(out_mult[0]))
    out_coords = np.stack([out_keys // out_mult[0], (out_keys // out_mult[1]) % out_shape[0],
                           (out_keys // out_mult[2]) % out_shape[1], out_keys % out_shape[2]], axis=1)
    # the pairs are those candidates: for one kernel index an input meets one output, and the output's
    # coordinates grow with the input's, so each offset's pairs come sorted by output (inputs ascending)
    rows = np.split(np.searchsorted(out_keys, keys), np.cumsum([len(source) for source in sources])[:-1])
    found = list(zip(rows, sources))
    ins, outs = [], []
    for out_point, in_voxel in found:
        if unique.size < n:  # duplicates: every point of the voxel, in point order
            out_point, in_point = _expand(out_point, in_voxel, start, members, expand_a=False)
        else:
            in_point = members[in_voxel]
        ins.append(in_point)
        outs.append(out_point)
    return (out_coords, *_concatenate(ins, outs, K))


# ---------------------------------------------------------------- voxelisation


def voxelize(points, voxel_size, *, batch=None, return_inverse: bool = False):
    """Points to voxels: the distinct voxel coordinates and the mean of each voxel's points.

    Parameters
    ----------
    points : (P, C) float numpy array or torch tensor, C >= 3
        x, y, z first, then any per-point features (KITTI: reflectance).
    voxel_size : float or three floats
        The voxel's edge (per axis), > 0.
    batch : (P,) int array, optional
        Each point's cloud (>= 0); default: one cloud (batch 0).
    return_inverse : bool
        Also return each point's voxel row.

    Returns
    -------
    coords : (V, 4) int64 numpy array
        Batch, x, y, z of every occupied voxel, sorted; ``x = floor(x / size) - min`` over all
        points, so coordinates start at 0.
    features : (V, C) float32
        The mean of each voxel's points, every column (numpy, or torch for torch points).
    inverse : (P,) int64, only with ``return_inverse``
    """
    torch_in = is_torch(points)
    array = _host_array(points, "points")
    if not np.issubdtype(array.dtype, np.floating):
        raise TypeError(f"points must be floating point, got {array.dtype}")
    if array.ndim != 2 or array.shape[1] < 3:
        raise ValueError(f"points must be (P, C) with C >= 3 (x, y, z first), got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError("points must be finite (no NaN or inf)")
    size = np.broadcast_to(np.asarray(voxel_size, dtype=np.float64), (3,)) if np.ndim(voxel_size) <= 1 else None
    if size is None or (np.ndim(voxel_size) == 1 and np.shape(voxel_size) != (3,)):
        raise ValueError(f"voxel_size must be a number or three numbers, got {voxel_size!r}")
    if not (size > 0).all() or not np.isfinite(size).all():
        raise ValueError(f"voxel_size must be positive, got {voxel_size!r}")
    P = array.shape[0]
    if batch is None:
        batch_ids = np.zeros(P, dtype=np.int64)
    else:
        batch_ids = _host_array(batch, "batch")
        if not np.issubdtype(batch_ids.dtype, np.integer) or batch_ids.shape != (P,):
            raise ValueError(f"batch must be {P} integers (one per point), got {batch_ids.dtype} {batch_ids.shape}")
        batch_ids = batch_ids.astype(np.int64)
        if P and batch_ids.min() < 0:
            raise ValueError(f"batch indices must be >= 0, got {int(batch_ids.min())}")
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = np.floor(array[:, :3].astype(np.float64) / size)
    if P:
        scaled -= scaled.min(axis=0)  # exact for the floats that can be coordinates at all
        top = scaled.max(axis=0)
        if not np.isfinite(top).all() or (top > MAX_COORDINATE).any():
            raise ValueError(f"voxelize: the points span {top.tolist()} voxels of {size.tolist()} per axis, over the "
                             f"largest coordinate {MAX_COORDINATE} (an int32 grid, as spconv's): use larger voxels or "
                             "crop the points")
    cells = scaled.astype(np.int64)
    grid = np.c_[batch_ids, cells]
    if P:
        extent = grid.max(axis=0) + 1
        mult = _grid(extent[1:], int(extent[0]))
        keys = grid @ mult
    else:
        keys = np.zeros(0, np.int64)
    unique, inverse, start, members = _unique_voxels(keys)
    coords = grid[members[start[:-1]]] if P else np.zeros((0, 4), np.int64)
    sums = np.add.reduceat(array[members].astype(np.float64), start[:-1], axis=0) if P else \
        np.zeros((0, array.shape[1]), dtype=np.float64)
    features = (sums / np.diff(start)[:, None]).astype(np.float32)
    if torch_in:
        import torch  # noqa: PLC0415 - only for torch input

        features = torch.from_numpy(features)
    return (coords, features, inverse) if return_inverse else (coords, features)


# ---------------------------------------------------------------- the convolution


def _check_kmap(kmap) -> KernelMap:
    if not isinstance(kmap, KernelMap):
        raise TypeError(f"kmap must be a KernelMap (sparsetir.ops.kernel_map), got {type(kmap).__name__}")
    return kmap


def compile_sparse_conv3d(kmap, c_in: int, c_out: int, *, format=None, target="llvm", dtype=None, **knobs):
    """The compiled convolution for one kernel map and channel counts (reused for a map of the same
    content: ``ops.prepared``).

    Parameters
    ----------
    kmap : KernelMap
        From :func:`kernel_map`; or the map as rgms's relational input (``kmap.relational()``,
        what the tuner passes), compiled without the cache.
    c_in, c_out : int
        Input and output channels.
    format : str, optional
        A relational format: ``"csf"`` (output-stationary, the default), ``"relcsr"`` or
        ``"ell3d"`` (offset by offset: gather-GEMM-scatter), or ``"auto"`` (the tuning
        database's choice for this map and channels, ``tune("conv", kmap.relational(), (c_in,
        c_out))``; tunes on a miss, ``$SPARSETIR_TUNE_BUDGET_S``).
    target, dtype
        As for ``compile_rgms``; ``dtype`` float32 (default), float16 or bfloat16 (float32
        accumulation) or float64.
    **knobs
        rgms's knobs (here ``dataflow="edge"`` and ``feature_loops="lk"`` unless given) and the
        schedule template's.

    Returns
    -------
    Kernel
        ``kernel(features, weight, out=None)``: features ``(N, c_in)``, weight ``(K, c_in, c_out)``,
        returns ``(M, c_out)``. ``kernel.timings`` holds its conversion and compile seconds.
    """
    c_in, c_out = check_feat(c_in, "c_in"), check_feat(c_out, "c_out")
    if not isinstance(kmap, KernelMap):
        return _compile(read_relational_input(kmap), c_in, c_out, format, target, dtype, knobs)
    key = (c_in, c_out, repr(format), repr(normalize_target(target)), None if dtype is None else str(dtype),
           tuple(sorted((name, repr(value)) for name, value in knobs.items())))
    structure = (kmap.indptr, kmap.in_idx, kmap.out_idx)  # by content: a map edited in place is prepared again
    return PREPARED.get(("conv", kmap.num_inputs, kmap.num_outputs, *key), structure,
                        lambda: _compile(kmap.relational(), c_in, c_out, format, target, dtype, knobs))


def _compile(matrix: RelationalMatrix, c_in: int, c_out: int, format, target, dtype, knobs: dict):
    knobs = {**CONV_KNOBS, **knobs}
    tune_s = None
    if isinstance(format, str) and format.strip().lower() == "auto":
        started = time.perf_counter()
        config = dict(hooks.format_resolver()("conv", matrix, (c_in, c_out), target=target, dtype=dtype))
        tune_s = time.perf_counter() - started
        format = config.pop("format")
        knobs = {**knobs, **config}
    target_dict = normalize_target(target)
    if format is None:
        format = default_format(matrix, c_in, c_out, device_of(target_dict), knobs.pop("stage", None), dtype)
    if ("vector_width" not in knobs and c_out % 8 == 0 and target_dict["kind"] == "llvm"
            and not getattr(parse_format(format), "staged", False)):
        knobs["vector_width"] = 8  # measured faster than 16 lanes for every csf layer shape here (zen4)
    kernel = compile_rgms(matrix, c_in, c_out, format=format, target=target, dtype=dtype, **knobs)
    if tune_s is not None:
        kernel.timings["tune_s"] = tune_s
    return kernel


def sparse_conv3d(features, kmap: KernelMap, weight, *, out=None, format=None, target="llvm", **knobs):
    """A sparse 3-D convolution: ``Y[q] = sum_k sum_{(p, q) in pairs(k)} features[p] @ weight[k]``.

    Parameters
    ----------
    features : (N, c_in) numpy array or torch tensor
        One row per input point of ``kmap`` (float32, float16, bfloat16 or float64).
    kmap : KernelMap
        From :func:`kernel_map`; reuse it for every layer with the same points and geometry.
    weight : (K, c_in, c_out)
        ``weight[k]`` goes with ``kmap.offsets[k]``; the features' type and dtype. (spconv's
        ``SubMConv3d.weight``, ``(c_out, k, k, k, c_in)``, is
        ``weight.permute(1, 2, 3, 4, 0).reshape(K, c_in, c_out)``.)
    out : (M, c_out), optional
        Written in place and returned.
    format, target, **knobs
        As for :func:`compile_sparse_conv3d`; the kernel is compiled once per (map, channels,
        dtype, format, knobs) and reused for any map of the same content (``ops.prepared``).

    Returns
    -------
    (M, c_out) array of the features' type and dtype, one row per ``kmap.out_coords``.
    """
    _check_kmap(kmap)
    dtype = check_dense_operand(features, "features")
    check_dense_operand(weight, "weight", ndim=3)
    if type(features) is not type(weight) or str(weight.dtype) != str(features.dtype):
        raise TypeError(f"features and weight must be of one type and dtype, got {type(features).__name__} "
                        f"{features.dtype} and {type(weight).__name__} {weight.dtype}")
    if features.shape[0] != kmap.num_inputs:
        raise ValueError(f"the kernel map has {kmap.num_inputs} input points, but features has {features.shape[0]} rows")
    if weight.shape[0] != kmap.num_offsets or weight.shape[1] != features.shape[1]:
        raise ValueError(f"weight must be ({kmap.num_offsets}, {features.shape[1]}, c_out) for {kmap.num_offsets} "
                         f"kernel offsets and {features.shape[1]} input channels, got {tuple(weight.shape)}")
    kernel = compile_sparse_conv3d(kmap, int(features.shape[1]), int(weight.shape[2]), format=format, target=target,
                                   dtype=dtype, **knobs)
    return kernel(features, weight, out=out)


CONV = register_op(OpSpec("conv", function=rgms_function, compile=compile_sparse_conv3d, call=sparse_conv3d,
                          reference=CONV_REFERENCE, knobs={"cpu": {"vector_width": 8, **STAGED_KNOBS}, "cuda": {"lanes": ...}},
                          default_format=DEFAULT_FORMAT,
                          input="relational", feature_sizes=lambda X, W: (int(X.shape[1]), int(W.shape[2])),
                          feature_args=rgms_feature_args))
