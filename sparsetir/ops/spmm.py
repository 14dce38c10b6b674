"""SpMM, ``C = A @ B`` with sparse A and dense B, composed from the IR (no template).

Stage I over CSR: ``C[i, k] += A[i, j] * B[j, k]`` over ``[I, J, K]`` with kinds
"SRS"; any other format rewrites it with ``format_decompose``.
"""

from __future__ import annotations

import time

from ..formats import read_sparse_input
from ..formats.csr import choose_index_dtype
from ..formats.structure import SourceAxes
from ..ir import SparseBuffer, SparseFunction, dense_fixed, size_vars, sparse_iteration, sparse_variable
from ..runtime.kernel import Kernel
from .operands import (check_dense_operand, check_feat, compose_format, make_kernel, resolve_dtype,
                       resolved_format, target_and_device)


def spmm_function(fmt, feat: int, dtype: str = "float32", idtype: str = "int32", device: str = "cpu",
                  horizontal_fuse=None) -> SparseFunction:
    """The Stage I SpMM in ``fmt`` with ``feat`` columns in B."""
    m, n, nnz = size_vars("m n nnz", idtype)
    rows = dense_fixed("I", m, idtype)
    cols = sparse_variable("J", rows, n, nnz)
    dense_rows = dense_fixed("J_", n, idtype)
    features = dense_fixed("K", feat, idtype)
    A = SparseBuffer("A", (rows, cols), dtype)
    B = SparseBuffer("B", (dense_rows, features), dtype)
    C = SparseBuffer("C", (rows, features), dtype)

    @sparse_iteration([rows, cols, features], "SRS", name="spmm")
    def spmm(i, j, k):
        C[i, k] += A[i, j] * B[j, k]

    func = SparseFunction("spmm", [spmm], params=[A, B, C])
    return compose_format(func, fmt, SourceAxes(rows, cols, [A], "S", "R"), device, fuse=horizontal_fuse)


def compile_spmm(A, feat, *, format="csr", target="llvm", dtype=None, index_dtype=None, **knobs) -> Kernel:
    """Compile SpMM for A's structure and ``feat`` columns; call the result as ``kernel(B, out=None, values=None)``.

    ``knobs``: the schedule template's (see ``sparsetir.schedule``) and ``horizontal_fuse``
    (run a format's sub-formats as one loop; default: on CUDA).
    """
    feat = check_feat(feat)
    target, device = target_and_device(target)
    started = time.perf_counter()
    matrix = read_sparse_input(A)
    fmt = resolved_format(format, matrix)
    dtype = resolve_dtype(dtype, matrix.values.dtype, device)
    m, n = matrix.shape
    idtype = choose_index_dtype(m + 1, n + 1, matrix.nnz, m * feat, n * feat, requested=index_dtype)
    converted = fmt.convert(matrix, dtype=dtype, index_dtype=idtype)
    convert_s = time.perf_counter() - started
    fuse = knobs.get("horizontal_fuse")
    return make_kernel("spmm", lambda: spmm_function(fmt, feat, dtype, idtype, device, fuse), fmt, converted,
                       feat=feat, dtype=dtype, idtype=idtype, target=target, device=device, knobs=knobs,
                       inputs=["B"], output="C", convert_s=convert_s)


def spmm(A, B, *, format="csr", target="llvm", out=None, **knobs):
    """``A @ B`` for a scipy/torch sparse A and a dense numpy/torch B; returns B's type and dtype."""
    dtype = check_dense_operand(B, "B")
    matrix = read_sparse_input(A)
    if B.shape[0] != matrix.shape[1]:
        raise ValueError(f"A is {matrix.shape[0]}x{matrix.shape[1]} but B has {B.shape[0]} rows")
    kernel = compile_spmm(matrix, int(B.shape[1]), format=format, target=target, dtype=dtype, **knobs)
    return kernel(B, out=out)
