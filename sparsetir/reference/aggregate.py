"""The aggregation stages' reference (``sparsetir.ops.aggregate``): float64 results and tolerances.

``A`` is the structure's pattern (scipy CSR, ``m`` targets x ``n`` sources, row ``i`` = a target); a
stage over A^T (``spread``, ``columns``, ``columns_masked``) is given A too, and its result has one
row per source. What each stage computes (``k`` a feature; every sum is over A's entries ``(i, j)``):

=================  ===========================================================  ============
stage              result                                                       inputs
=================  ===========================================================  ============
``reduce``         ``C[i, k] = max_j B[j, k]`` (or min); empty rows: ``empty``  B
``ties``           ``N[i, k] = #{j : B[j, k] == C[i, k]}``                      B, C
``spread``         ``D[j, k] = sum_i where(X[j, k] == C[i, k], G[i, k], 0)``    X, C, G
``rows``           ``C[i, k] = S[i] * sum_j B[j, k]``                           B, S
``columns``        ``D[j, k] = sum_i S[i] * G[i, k]``                           G, S
``rows_masked``    ``C[i, k] = S[i] * sum_j B[j, k] * M[j, k]``                 B, M, S
``columns_masked`` ``D[j, k] = M[j, k] * sum_i S[i] * G[i, k]``                 G, M, S
=================  ===========================================================  ============

:func:`stage_inputs` draws a stage's float32 inputs from a seed (B on a coarse grid, so rows
have ties; C the exact float32 max (min) of B, as the forward leaves it; M a uint8 keep mask;
S = 1 / degree); :func:`stage_reference` gives the float64 result and its tolerance (exact
stages: counts and maxima, 0).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .case import rounding_tolerance

__all__ = ["REDUCE_STAGES", "STAGES", "TRANSPOSED_STAGES", "stage_inputs", "stage_reference"]

#: stage -> its inputs, in the kernel's parameter order
STAGES = {"reduce": ("B",), "ties": ("B", "C"), "spread": ("X", "C", "G"), "rows": ("B", "S"),
          "columns": ("G", "S"), "rows_masked": ("B", "M", "S"), "columns_masked": ("G", "M", "S")}
TRANSPOSED_STAGES = ("spread", "columns", "columns_masked")  # bound to A^T: one result row per source
REDUCE_STAGES = ("reduce", "ties", "spread")  # the stages that depend on the reducer
_REDUCERS = {"max": (np.maximum, -np.inf), "min": (np.minimum, np.inf)}
_EXACT = 1e-30  # the tolerance of an exact result (a maximum, a count)


def _check(stage: str, reducer: str) -> None:
    if stage not in STAGES:
        raise ValueError(f"unknown aggregation stage {stage!r}; known: {', '.join(STAGES)}")
    if reducer not in _REDUCERS:
        raise ValueError(f"reducer must be 'max' or 'min', got {reducer!r}")


def _pattern(A: sp.csr_matrix) -> sp.csr_matrix:
    A = sp.csr_matrix(A)
    return sp.csr_matrix((np.ones(A.indices.shape[0]), A.indices, A.indptr), shape=A.shape)


def _reduced(A: sp.csr_matrix, B: np.ndarray, reducer: str, empty) -> np.ndarray:
    """Each row's max (min) of B over its entries; ``empty`` where a row has none (None: the identity)."""
    combine, identity = _REDUCERS[reducer]
    degree = np.diff(A.indptr)
    C = np.full((A.shape[0], B.shape[1]), identity)
    nonempty = degree > 0
    if A.indices.size:
        starts = A.indptr[:-1][nonempty]
        C[nonempty] = combine.reduceat(np.asarray(B, np.float64)[A.indices], starts, axis=0)
    if empty is not None:
        C[~nonempty] = empty
    return C


def stage_inputs(stage: str, reducer: str, A: sp.csr_matrix, feat: int, rng: np.random.Generator) -> dict:
    """A stage's float32 (``M``: uint8) inputs by name, drawn with ``rng``."""
    _check(stage, reducer)
    A = _pattern(A)
    m, n = A.shape
    degree = np.diff(A.indptr).astype(np.float64)
    S = np.where(degree > 0, 1.0 / np.maximum(degree, 1.0), 0.0).astype(np.float32)
    B = (rng.integers(-8, 9, size=(n, feat)) / 4.0).astype(np.float32)  # a coarse grid: rows have ties
    G = rng.standard_normal((m, feat), dtype=np.float32)
    C = _reduced(A, B, reducer, 0.0).astype(np.float32)  # the forward's result, empty rows 0 (as the op leaves it)
    mask = (rng.random((n, feat)) < 0.8).astype(np.uint8)
    made = {"B": B, "C": C, "X": B, "G": G, "M": mask, "S": S}
    return {name: made[name] for name in STAGES[stage]}


def stage_reference(stage: str, reducer: str, A: sp.csr_matrix, inputs: dict, *, empty=None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(result, tolerance)`` in float64 of ``stage`` on ``inputs`` (``stage_inputs``'s names).
    ``empty``: the reduce stage's value on an empty row (None: the reduction's identity, as the kernel
    leaves it; the op sets 0)."""
    _check(stage, reducer)
    A = _pattern(A)
    x = {name: np.asarray(value, np.float64) for name, value in inputs.items()}
    lengths = (np.diff(A.indptr) + 1.0)[:, None]
    if stage == "reduce":
        result = _reduced(A, x["B"], reducer, empty)
        return result, np.full(result.shape, _EXACT)
    if stage == "ties":
        rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
        hits = (x["B"][A.indices] == x["C"][rows]).astype(np.float64)
        result = np.zeros_like(x["C"])
        np.add.at(result, rows, hits)
        return result, np.full(result.shape, _EXACT)
    if stage == "spread":
        rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
        share = np.where(x["X"][A.indices] == x["C"][rows], x["G"][rows], 0.0)
        result = np.zeros_like(x["X"])
        np.add.at(result, A.indices, share)
        magnitude = np.zeros_like(result)
        np.add.at(magnitude, A.indices, np.abs(share))
        return result, rounding_tolerance(magnitude, (np.diff(A.tocsc().indptr) + 1.0)[:, None])
    if stage in ("rows", "rows_masked"):
        B = x["B"] * x["M"] if stage == "rows_masked" else x["B"]
        scale = x["S"][:, None]
        return scale * (A @ B), rounding_tolerance(np.abs(scale) * (A @ np.abs(B)), lengths)
    # columns, columns_masked: A^T diag(S) G, masked by M in the source's rows
    scaled = x["S"][:, None] * x["G"]
    result, magnitude = A.T @ scaled, A.T @ np.abs(scaled)
    if stage == "columns_masked":
        result, magnitude = result * x["M"], magnitude * x["M"]
    return result, rounding_tolerance(magnitude, (np.diff(A.tocsc().indptr) + 1.0)[:, None])
