"""Stage I sparse IR: axes, sparse buffers, sparse iterations and functions.

Example (CSR SpMM)::

    from sparsetir import ir as sp
    m, n, nnz = sp.size_vars("m n nnz")
    I = sp.dense_fixed("I", m)
    J = sp.sparse_variable("J", I, n, nnz)
    J_ = sp.dense_fixed("J_", n)
    K = sp.dense_fixed("K", 64)
    A = sp.SparseBuffer("A", (I, J))
    B = sp.SparseBuffer("B", (J_, K))
    C = sp.SparseBuffer("C", (I, K))

    @sp.sparse_iteration([I, J, K], "SRS")
    def spmm(i, j, k):
        C[i, k] += A[i, j] * B[j, k]

    func = sp.SparseFunction("spmm", [spmm], params=[A, B, C])
"""

from .axis import (
    Axis,
    FusedAxis,
    dense_fixed,
    dense_variable,
    fuse,
    size_var,
    size_vars,
    sparse_fixed,
    sparse_variable,
)
from .buffer import SparseBuffer
from .function import SparseFunction
from .iteration import IDENTITY, SparseIteration, SparseStore, sparse_iteration
from .math import cast, exp, log, max, min, sqrt, where
from .printer import format_stage1

__all__ = [
    "IDENTITY",
    "Axis",
    "FusedAxis",
    "cast",
    "exp",
    "log",
    "max",
    "min",
    "sqrt",
    "where",
    "SparseBuffer",
    "SparseFunction",
    "SparseIteration",
    "SparseStore",
    "dense_fixed",
    "dense_variable",
    "format_stage1",
    "fuse",
    "size_var",
    "size_vars",
    "sparse_fixed",
    "sparse_iteration",
    "sparse_variable",
]
