"""Sparse 3-D convolution's reference: ``Y[q] = sum_k sum_{(p, q) in pairs(k)} X[p] @ W[k]`` in float64.

A kernel map is read through its interface (``sparsetir.ops.KernelMap``: ``in_idx``, ``out_idx``,
``indptr`` (pairs grouped by offset), ``num_outputs``); a relational input (the map as rgms sees
it, ``A_k[out, in] = 1``: ``coordinates()``, ``shape``, ``num_relations``) works too, which is
what the tuner hands :func:`conv_case`. One matmul per offset, so no ``(pairs, c_in, c_out)``
array is ever built.
"""

from __future__ import annotations

import numpy as np

from .case import Case, rounding_tolerance
from .registry import OpReference, register_reference


def offset_pairs(kmap) -> tuple[list, int]:
    """``([(k, in_idx, out_idx), ...], num_outputs)`` of a kernel map or a relational input (int64)."""
    if hasattr(kmap, "indptr") and hasattr(kmap, "in_idx"):
        bounds = np.asarray(kmap.indptr, dtype=np.int64).tolist()
        in_idx, out_idx = np.asarray(kmap.in_idx, np.int64), np.asarray(kmap.out_idx, np.int64)
        groups = [(k, in_idx[lo:hi], out_idx[lo:hi]) for k, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]
        return groups, int(kmap.num_outputs)
    for attribute in ("coordinates", "shape", "num_relations"):
        if not hasattr(kmap, attribute):
            raise TypeError(f"conv reference: expected a KernelMap or a RelationalMatrix, got {type(kmap).__name__}")
    relation, row, col = kmap.coordinates()
    bounds = np.searchsorted(relation, np.arange(kmap.num_relations + 1)).tolist()
    groups = [(k, col[lo:hi], row[lo:hi]) for k, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]
    return groups, int(kmap.shape[0])


def scatter_products(groups, num_outputs: int, X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``sum_k scatter(out_k, X[in_k] @ W[k])`` in X's dtype (float64 callers pass float64)."""
    Y = np.zeros((num_outputs, W.shape[2]), dtype=np.result_type(X, W))
    for k, source, target in groups:
        if source.size == 0:
            continue
        products = X[source] @ W[k]
        if target.size < 2 or np.all(target[1:] > target[:-1]):  # distinct outputs (no duplicate points)
            Y[target] += products
        else:
            np.add.at(Y, target, products)
    return Y


def conv_reference(kmap, X: np.ndarray, W: np.ndarray) -> Case:
    """The float64 output, its entry-wise tolerance (a float32 sum over every pair's ``c_in`` products)
    and the minimum bytes (pairs, X, W and Y once)."""
    groups, M = offset_pairs(kmap)
    X64, W64 = np.asarray(X, dtype=np.float64), np.asarray(W, dtype=np.float64)
    reference = scatter_products(groups, M, X64, W64)
    magnitude = scatter_products(groups, M, np.abs(X64), np.abs(W64))
    fan_in = np.zeros(M)
    for _, _, target in groups:
        np.add.at(fan_in, target, 1.0)
    tolerance = rounding_tolerance(magnitude, fan_in[:, None] * X.shape[1] + 1.0)
    pairs = sum(source.size for _, source, _ in groups)
    min_bytes = pairs * 8 + X.nbytes + W.nbytes + M * W.shape[2] * 4
    return Case((X, W), reference, tolerance, min_bytes)


def conv_case(kmap, feat, rng: np.random.Generator) -> Case:
    """Random standard-normal float32 features ``(N, c_in)`` and weights ``(K, c_in, c_out)`` (scaled by
    ``1/sqrt(c_in)``); ``feat`` is ``c`` or ``(c_in, c_out)``; ``kmap`` as :func:`conv_reference`."""
    c_in, c_out = (feat, feat) if np.ndim(feat) == 0 else feat
    groups, _ = offset_pairs(kmap)
    n = int(kmap.num_inputs) if hasattr(kmap, "num_inputs") else int(kmap.shape[1])
    X = rng.standard_normal((n, c_in), dtype=np.float32)
    W = (rng.standard_normal((len(groups), c_in, c_out), dtype=np.float32) / np.sqrt(c_in)).astype(np.float32)
    return conv_reference(kmap, X, W)


def layer_operands(n: int, K: int, c_in: int, c_out: int, stride: int, level: int, seed: int = 0):
    """A benchmark layer's seeded standard-normal features ``(n, c_in)`` and weights ``(K, c_in, c_out)``
    (scaled by ``1/sqrt(K c_in)``), float32: the CPU benchmark's and the GPU bundle's, one stream per layer."""
    rng = np.random.default_rng([seed, c_in, c_out, stride, level])
    X = rng.standard_normal((n, c_in), dtype=np.float32)
    W = (rng.standard_normal((K, c_in, c_out), dtype=np.float32) / np.sqrt(K * c_in)).astype(np.float32)
    return X, W


def conv_flops(pairs: int, feat) -> int:
    """``2 pairs c_in c_out``: one row of X times ``W[k]`` per pair."""
    c_in, c_out = (feat, feat) if np.ndim(feat) == 0 else feat
    return 2 * int(pairs) * int(c_in) * int(c_out)


CONV_REFERENCE = register_reference(OpReference(
    name="conv",
    make_case=conv_case,
    reference=conv_reference,
    flops=conv_flops,
))
