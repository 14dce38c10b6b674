"""Small Stage I functions written with the public IR API alone, shared by the tests."""

from __future__ import annotations

from sparsetir import ir as sp


def csr_spmm(feat: int = 64):
    m, n, nnz = sp.size_vars("m n nnz")
    I = sp.dense_fixed("I", m)
    J = sp.sparse_variable("J", I, n, nnz)
    J_ = sp.dense_fixed("J_", n)
    K = sp.dense_fixed("K", feat)
    A = sp.SparseBuffer("A", (I, J))
    B = sp.SparseBuffer("B", (J_, K))
    C = sp.SparseBuffer("C", (I, K))

    @sp.sparse_iteration([I, J, K], "SRS")
    def spmm(i, j, k):
        C[i, k] += A[i, j] * B[j, k]

    return sp.SparseFunction("spmm", [spmm], params=[A, B, C]), (I, J, K)


def spmv(dtype: str = "float32"):
    """y = A x with A in CSR."""
    m, n, nnz = sp.size_vars("m n nnz")
    I = sp.dense_fixed("I", m)
    J = sp.sparse_variable("J", I, n, nnz)
    J_ = sp.dense_fixed("J_", n)
    A = sp.SparseBuffer("A", (I, J), dtype)
    x = sp.SparseBuffer("x", (J_,), dtype)
    y = sp.SparseBuffer("y", (I,), dtype)

    @sp.sparse_iteration([I, J], "SR")
    def matvec(i, j):
        y[i] += A[i, j] * x[j]

    return sp.SparseFunction("spmv", [matvec], params=[A, x, y])


def masked_product(reads: int = 1, dtype: str = "float32"):
    """C = A o M over A's pattern, where M has its own pattern (read ``reads`` times)."""
    m, n, nnz_a, nnz_m = sp.size_vars("m n nnz_a nnz_m")
    I = sp.dense_fixed("I", m)
    JA = sp.sparse_variable("JA", I, n, nnz_a)
    JM = sp.sparse_variable("JM", I, n, nnz_m)
    A = sp.SparseBuffer("A", (I, JA), dtype)
    M = sp.SparseBuffer("M", (I, JM), dtype)
    C = sp.SparseBuffer("C", (I, JA), dtype)

    @sp.sparse_iteration([I, JA], "SS")
    def product(i, j):
        value = A[i, j]
        for _ in range(reads):
            value = value * M[i, j]
        C[i, j] = value

    return sp.SparseFunction("product", [product], params=[A, M, C])


def masked_scale_rows(feat: int = 8):
    """Out[i, j, k] = M[i, j] * X[i, k]: the search for M depends on j only, not on k."""
    m, n, nnz_a, nnz_m = sp.size_vars("m n nnz_a nnz_m")
    I = sp.dense_fixed("I", m)
    JA = sp.sparse_variable("JA", I, n, nnz_a)
    JM = sp.sparse_variable("JM", I, n, nnz_m)
    K = sp.dense_fixed("K", feat)
    M = sp.SparseBuffer("M", (I, JM))
    X = sp.SparseBuffer("X", (I, K))
    Out = sp.SparseBuffer("Out", (I, JA, K))

    @sp.sparse_iteration([I, JA, K], "SSS")
    def scale(i, j, k):
        Out[i, j, k] = M[i, j] * X[i, k]

    return sp.SparseFunction("scale", [scale], params=[M, X, Out])
