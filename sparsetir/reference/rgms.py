"""RGMS's reference: ``Y = sum_r A_r X W_r`` in float64, its tolerance, its bytes and flops."""

from __future__ import annotations

import numpy as np

from .case import Case, rounding_tolerance
from .registry import OpReference, register_reference


def rgms_case(adj, feat, rng: np.random.Generator) -> Case:
    """Random standard-normal float32 X ``(n, f_in)`` and W ``(R, f_in, f_out)`` (scaled by
    ``1/sqrt(f_in)``) for relational ``adj`` (a ``formats.relational.RelationalMatrix``);
    ``feat`` is ``f_in == f_out`` or ``(f_in, f_out)``."""
    matrix = _relational(adj)
    f_in, f_out = (feat, feat) if np.ndim(feat) == 0 else feat
    X = rng.standard_normal((matrix.shape[1], f_in), dtype=np.float32)
    W = (rng.standard_normal((matrix.num_relations, f_in, f_out), dtype=np.float32) / np.sqrt(f_in)).astype(
        np.float32)
    return rgms_reference(matrix, X, W)


def rgms_reference(adj, X: np.ndarray, W: np.ndarray) -> Case:
    """``Y = sum_r A_r @ X @ W[r]`` in float64; min bytes: the structure and values, X, W and Y once."""
    matrix = _relational(adj)
    relation, row, col = matrix.coordinates()
    m = matrix.shape[0]
    values = np.asarray(matrix.values, dtype=np.float64)
    X64, W64 = np.asarray(X, dtype=np.float64), np.asarray(W, dtype=np.float64)
    reference = np.zeros((m, W.shape[2]))
    np.add.at(reference, row, _edge_products(X64[col] * values[:, None], W64, relation))
    magnitude = np.zeros_like(reference)
    np.add.at(magnitude, row, _edge_products(np.abs(X64[col] * values[:, None]), np.abs(W64), relation))
    degree = np.bincount(row, minlength=m)[:, None] * X.shape[1]
    tolerance = rounding_tolerance(magnitude, degree + 1.0)
    min_bytes = matrix.nnz * 8 + (matrix.num_relations * m + 1) * 4 + X.nbytes + W.nbytes + m * W.shape[2] * 4
    return Case((X, W), reference, tolerance, min_bytes)


def _edge_products(rows: np.ndarray, W: np.ndarray, relation: np.ndarray) -> np.ndarray:
    """``rows[e] @ W[relation[e]]`` for every edge, one matmul per relation (``relation`` is sorted:
    entries come relation-major), never holding an ``(nnz, f_in, f_out)`` array."""
    products = np.zeros((rows.shape[0], W.shape[2]))
    bounds = np.searchsorted(relation, np.arange(W.shape[0] + 1))
    for r, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        if hi > lo:
            products[lo:hi] = rows[lo:hi] @ W[r]
    return products


def rgms_flops(nnz: int, feat: int) -> int:
    """``2 nnz f f``: one row of X times W_r per edge (the edge dataflow's useful work)."""
    return 2 * nnz * feat * feat


def rgms_flops_by_dataflow(sizes: dict, f_in: int, f_out: int) -> dict:
    """Flops of each dataflow for a structure's sizes (``nrel``, ``n``, ``nnz`` and ``pairs`` where
    the format has (row, relation) pairs; else at most ``nnz`` of them)."""
    nnz, pairs = sizes["nnz"], sizes.get("pairs", sizes["nnz"])
    return {"edge": 2 * nnz * f_in * f_out,
            "aggregate": 2 * nnz * f_in + 2 * pairs * f_in * f_out,
            "transform": 2 * sizes["nrel"] * sizes["n"] * f_in * f_out + 2 * nnz * f_out}


def _relational(adj):
    """The reference layer sits below ``formats``, so it reads relational structure by its interface
    (``coordinates()``, ``shape``, ``num_relations``, ``values``, ``nnz``), which
    ``formats.relational.RelationalMatrix`` provides; callers convert raw inputs first."""
    for attribute in ("coordinates", "shape", "num_relations", "values", "nnz"):
        if not hasattr(adj, attribute):
            raise TypeError(f"rgms reference: expected a RelationalMatrix (formats.relational."
                            f"read_relational_input converts graphs and lists), got {type(adj).__name__}")
    return adj


RGMS_REFERENCE = register_reference(OpReference(
    name="rgms",
    make_case=rgms_case,
    reference=rgms_reference,
    flops=rgms_flops,
))
