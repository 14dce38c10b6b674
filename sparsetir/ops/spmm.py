"""SpMM, ``C = A @ B`` with sparse A and dense B, composed from the IR (no template).

Stage I: ``C[i, k] += A[i, j] * B[j, k]`` over ``[I, J, K]`` with kinds "SRS",
where ``(I, J)`` is the format's structure.
"""

from __future__ import annotations

import time

from ..formats import parse_format, read_sparse_input
from ..formats.csr import choose_index_dtype
from ..ir import SparseBuffer, SparseFunction, dense_fixed, size_vars, sparse_iteration
from ..runtime.kernel import Kernel
from .operands import check_dense_operand, check_feat, make_kernel, resolve_dtype, target_and_device


def spmm_function(fmt, feat: int, dtype: str = "float32", idtype: str = "int32") -> SparseFunction:
    """The Stage I SpMM for ``fmt`` with ``feat`` columns in B."""
    m, n, nnz = size_vars("m n nnz", idtype)
    rows, cols = fmt.axes(m, n, nnz)
    dense_rows = dense_fixed("J_", n, idtype)
    features = dense_fixed("K", feat, idtype)
    A = SparseBuffer("A", (rows, cols), dtype)
    B = SparseBuffer("B", (dense_rows, features), dtype)
    C = SparseBuffer("C", (rows, features), dtype)

    @sparse_iteration([rows, cols, features], "SRS", name="spmm")
    def spmm(i, j, k):
        C[i, k] += A[i, j] * B[j, k]

    return SparseFunction("spmm", [spmm], params=[A, B, C])


def compile_spmm(A, feat, *, format="csr", target="llvm", dtype=None, index_dtype=None, **knobs) -> Kernel:
    """Compile SpMM for A's structure and ``feat`` columns; call the result as ``kernel(B, out=None, values=None)``."""
    feat = check_feat(feat)
    fmt = parse_format(format)
    target, device = target_and_device(target)
    started = time.perf_counter()
    matrix = read_sparse_input(A)
    dtype = resolve_dtype(dtype, matrix.values.dtype, device)
    m, n = matrix.shape
    idtype = choose_index_dtype(m + 1, n + 1, matrix.nnz, m * feat, n * feat, requested=index_dtype)
    converted = fmt.convert(matrix, dtype=dtype, index_dtype=idtype)
    convert_s = time.perf_counter() - started
    return make_kernel("spmm", lambda: spmm_function(fmt, feat, dtype, idtype), fmt, converted, feat=feat,
                       dtype=dtype, idtype=idtype, target=target, knobs=knobs, inputs=["B"], output="C",
                       convert_s=convert_s)


def spmm(A, B, *, format="csr", target="llvm", out=None, **knobs):
    """``A @ B`` for a scipy/torch sparse A and a dense numpy/torch B; returns B's type and dtype."""
    dtype = check_dense_operand(B, "B")
    matrix = read_sparse_input(A)
    if B.shape[0] != matrix.shape[1]:
        raise ValueError(f"A is {matrix.shape[0]}x{matrix.shape[1]} but B has {B.shape[0]} rows")
    kernel = compile_spmm(matrix, int(B.shape[1]), format=format, target=target, dtype=dtype, **knobs)
    return kernel(B, out=out)
