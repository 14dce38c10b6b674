"""Stage I programs for the IR's newer features, written with the public API alone: row softmax
with internal intermediates, a GAT layer in one function, relation-outermost RGCN with atomics,
and a scatter-form sparse convolution through coordinate buffers. Each comes with the arrays and
sizes to run it and a numpy reference."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sparsetir import ir


def row_softmax():
    """``P = softmax(E)`` per row of a CSR pattern; the row max ``mx`` and sum ``s`` are internal."""
    m, n, nnz = ir.size_vars("m n nnz")
    I = ir.dense_fixed("I", m)
    J = ir.sparse_variable("J", I, n, nnz)
    E, P = ir.SparseBuffer("E", (I, J)), ir.SparseBuffer("P", (I, J))
    mx, s = ir.SparseBuffer("mx", (I,)), ir.SparseBuffer("s", (I,))

    @ir.sparse_iteration([I, J], "SR")
    def rowmax(i, j):
        mx[i] = ir.max(mx[i], E[i, j])

    @ir.sparse_iteration([I, J], "SR")
    def expsum(i, j):
        s[i] += ir.exp(E[i, j] - mx[i])

    @ir.sparse_iteration([I, J], "SS")
    def normalise(i, j):
        P[i, j] = ir.exp(E[i, j] - mx[i]) / s[i]

    return ir.SparseFunction("softmax", [rowmax, expsum, normalise], params=[E, P])


def softmax_arrays(A: sp.csr_matrix) -> tuple[dict, dict, np.ndarray]:
    """Arguments (P filled with NaN), sizes, and the reference softmax of A's values per row."""
    A = A.astype(np.float32)
    reference = np.empty_like(A.data)
    for row in range(A.shape[0]):
        span = slice(A.indptr[row], A.indptr[row + 1])
        if A.indptr[row] < A.indptr[row + 1]:
            e = np.exp(A.data[span].astype(np.float64) - A.data[span].max())
            reference[span] = e / e.sum()
    args = {"E": A.data, "P": np.full_like(A.data, np.nan), "J_indptr": A.indptr.astype(np.int32),
            "J_indices": A.indices.astype(np.int32)}
    return args, {"m": A.shape[0], "n": A.shape[1], "nnz": A.nnz}, reference


def gat_layer(feat: int, out_feat: int):
    """One attention layer on a graph: scores ``S = A .* (Q Kt^T)`` (SDDMM), row softmax, then
    ``O = softmax(S) V`` (SpMM), in one function; ``S``, ``mx`` and ``s`` are internal."""
    m, n, nnz = ir.size_vars("m n nnz")
    I = ir.dense_fixed("I", m)
    J = ir.sparse_variable("J", I, n, nnz)
    J_ = ir.dense_fixed("J_", n)
    K, F = ir.dense_fixed("K", feat), ir.dense_fixed("F", out_feat)
    A, S = ir.SparseBuffer("A", (I, J)), ir.SparseBuffer("S", (I, J))
    Q, Kt, V = ir.SparseBuffer("Q", (I, K)), ir.SparseBuffer("Kt", (J_, K)), ir.SparseBuffer("V", (J_, F))
    O = ir.SparseBuffer("O", (I, F))
    mx, s = ir.SparseBuffer("mx", (I,)), ir.SparseBuffer("s", (I,))

    @ir.sparse_iteration([I, J, K], "SSR")
    def scores(i, j, k):
        S[i, j] += A[i, j] * Q[i, k] * Kt[j, k]

    @ir.sparse_iteration([I, J], "SR")
    def rowmax(i, j):
        mx[i] = ir.max(mx[i], S[i, j])

    @ir.sparse_iteration([I, J], "SR")
    def expsum(i, j):
        s[i] += ir.exp(S[i, j] - mx[i])

    @ir.sparse_iteration([I, J, F], "SRS")
    def aggregate(i, j, f):
        O[i, f] += ir.exp(S[i, j] - mx[i]) / s[i] * V[j, f]

    return ir.SparseFunction("gat", [scores, rowmax, expsum, aggregate], params=[A, Q, Kt, V, O])


def gat_reference(A: sp.csr_matrix, Q, Kt, V) -> np.ndarray:
    A = A.astype(np.float64)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    S = A.data * np.einsum("ij,ij->i", Q[rows].astype(np.float64), Kt[A.indices].astype(np.float64))
    P = np.empty_like(S)
    for row in range(A.shape[0]):
        span = slice(A.indptr[row], A.indptr[row + 1])
        if A.indptr[row] < A.indptr[row + 1]:
            e = np.exp(S[span] - S[span].max())
            P[span] = e / e.sum()
    return sp.csr_matrix((P, A.indices, A.indptr), shape=A.shape) @ V.astype(np.float64)


def rgcn_relation_outermost(f_in: int, f_out: int, *, atomic: bool = True):
    """``Y[i] = sum_r sum_j A_r[i, j] X[j] W[r]`` with the relation loop outermost (R -> I -> J)."""
    nrel, m, n, nnz, rows = ir.size_vars("nrel m n nnz rows")
    R = ir.dense_fixed("R", nrel)
    I = ir.dense_variable("I", R, m, rows)  # every relation has all m rows
    J = ir.sparse_variable("J", I, n, nnz)
    I_, J_ = ir.dense_fixed("I_", m), ir.dense_fixed("J_", n)
    L, K = ir.dense_fixed("L", f_in), ir.dense_fixed("K", f_out)
    A, X, W = ir.SparseBuffer("A", (R, I, J)), ir.SparseBuffer("X", (J_, L)), ir.SparseBuffer("W", (R, L, K))
    Y = ir.SparseBuffer("Y", (I_, K))

    @ir.sparse_iteration([R, I, J, K, L], "RSRSR", atomic=atomic)
    def rgms(r, i, j, k, l):
        Y[i, k] += A[r, i, j] * X[j, l] * W[r, l, k]

    return ir.SparseFunction("rgms", [rgms], params=[A, X, W, Y])


def rgcn_arrays(matrices: list, X: np.ndarray, W: np.ndarray) -> tuple[dict, dict, np.ndarray]:
    """Per-relation CSR matrices stacked as R -> I -> J, the sizes, and ``sum_r A_r X W_r``."""
    m, n = matrices[0].shape
    J_indptr = np.concatenate([[0], np.cumsum(np.concatenate([np.diff(a.indptr) for a in matrices]))])
    args = {"A": np.concatenate([a.data for a in matrices]).astype(np.float32), "X": X, "W": W,
            "I_indptr": (np.arange(len(matrices) + 1) * m).astype(np.int32), "J_indptr": J_indptr.astype(np.int32),
            "J_indices": np.concatenate([a.indices for a in matrices]).astype(np.int32)}
    sizes = {"nrel": len(matrices), "m": m, "n": n, "nnz": int(args["A"].size), "rows": len(matrices) * m}
    reference = sum(a.astype(np.float64) @ X.astype(np.float64) @ W[r].astype(np.float64)
                    for r, a in enumerate(matrices))
    return args, sizes, reference


def scatter_conv(c_in: int, c_out: int):
    """Sparse convolution in scatter form: ``Out[OutIdx[k, p]] += F[InIdx[k, p]] W[k]`` for every
    kernel offset ``k`` and pair ``p``; the index buffers are coordinates of ``Nout`` and ``Nin``."""
    nk, npairs, nin, nout = ir.size_vars("nk npairs nin nout")
    Kx, P = ir.dense_fixed("Kx", nk), ir.dense_fixed("P", npairs)
    Ci, Co = ir.dense_fixed("Ci", c_in), ir.dense_fixed("Co", c_out)
    Nin, Nout = ir.dense_fixed("Nin", nin), ir.dense_fixed("Nout", nout)
    InIdx, OutIdx = ir.SparseBuffer("InIdx", (Kx, P), "int32"), ir.SparseBuffer("OutIdx", (Kx, P), "int32")
    F, W, Out = ir.SparseBuffer("F", (Nin, Ci)), ir.SparseBuffer("W", (Kx, Ci, Co)), ir.SparseBuffer("Out", (Nout, Co))

    @ir.sparse_iteration([Kx, P, Co, Ci], "RRSR", atomic=True)
    def conv(k, p, o, c):
        Out[OutIdx[k, p], o] += F[InIdx[k, p], c] * W[k, c, o]

    return ir.SparseFunction("conv", [conv], params=[InIdx, OutIdx, F, W, Out])


def scatter_arrays(rng, offsets: int, pairs: int, n_in: int, n_out: int, c_in: int, c_out: int):
    in_idx = rng.integers(0, n_in, (offsets, pairs)).astype(np.int32)
    out_idx = rng.integers(0, n_out, (offsets, pairs)).astype(np.int32)
    F = rng.standard_normal((n_in, c_in)).astype(np.float32)
    W = rng.standard_normal((offsets, c_in, c_out)).astype(np.float32)
    reference = np.zeros((n_out, c_out))
    for k in range(offsets):
        np.add.at(reference, out_idx[k], F[in_idx[k]].astype(np.float64) @ W[k])
    args = {"InIdx": in_idx, "OutIdx": out_idx, "F": F, "W": W, "Out": np.full((n_out, c_out), np.nan, np.float32)}
    return args, {"nk": offsets, "npairs": pairs, "nin": n_in, "nout": n_out}, reference
