"""SpMM, ``C = A @ B`` with sparse A and dense B, composed from the IR (no template).

Stage I over CSR: ``C[i, k] += A[i, j] * B[j, k]`` over ``[I, J, K]`` with kinds
"SRS"; any other format rewrites it with ``format_decompose``.
"""

from __future__ import annotations

from ..formats import read_sparse_input
from ..formats.structure import SourceAxes
from ..ir import SparseBuffer, SparseFunction, sparse_iteration
from ..runtime.kernel import Kernel
from .operands import (check_dense_operand, compose_format, csr_operand_axes, make_kernel,
                       prepare_matrix, tuned_format)


def spmm_function(fmt, feat: int, dtype: str = "float32", idtype: str = "int32", device: str = "cpu",
                  horizontal_fuse=None) -> SparseFunction:
    """The Stage I SpMM in ``fmt`` with ``feat`` columns in B."""
    axes = csr_operand_axes(feat, idtype)
    rows, cols, features = axes.rows, axes.cols, axes.features
    A = SparseBuffer("A", (rows, cols), dtype)
    B = SparseBuffer("B", (axes.dense_cols, features), dtype)
    C = SparseBuffer("C", (rows, features), dtype)

    @sparse_iteration([rows, cols, features], "SRS", name="spmm")
    def spmm(i, j, k):
        C[i, k] += A[i, j] * B[j, k]

    func = SparseFunction("spmm", [spmm], params=[A, B, C])
    return compose_format(func, fmt, SourceAxes(rows, cols, [A], "S", "R"), device, fuse=horizontal_fuse)


def compile_spmm(A, feat, *, format="csr", target="llvm", dtype=None, index_dtype=None, **knobs) -> Kernel:
    """Compile SpMM for A's structure and ``feat`` columns; call the result as ``kernel(B, out=None, values=None)``.

    ``knobs``: the schedule template's (see ``sparsetir.schedule``) and ``horizontal_fuse``
    (run a format's sub-formats as one loop; default: on CUDA). ``format="auto"`` takes the
    format and knobs from the tuning database, tuning on a miss (``sparsetir.tune``).
    """
    format, knobs = tuned_format("spmm", A, feat, format, target, dtype, knobs)
    p = prepare_matrix(A, feat, format=format, target=target, dtype=dtype, index_dtype=index_dtype)
    fuse = knobs.get("horizontal_fuse")
    return make_kernel("spmm", lambda: spmm_function(p.fmt, p.feat, p.dtype, p.idtype, p.device, fuse), p,
                       knobs=knobs, inputs=["B"], output="C")


def spmm(A, B, *, format="csr", target="llvm", out=None, **knobs):
    """``A @ B`` for a scipy/torch sparse A and a dense numpy/torch B; returns B's type and dtype."""
    dtype = check_dense_operand(B, "B")
    matrix = read_sparse_input(A)
    if B.shape[0] != matrix.shape[1]:
        raise ValueError(f"A is {matrix.shape[0]}x{matrix.shape[1]} but B has {B.shape[0]} rows")
    kernel = compile_spmm(matrix, int(B.shape[1]), format=format, target=target, dtype=dtype, **knobs)
    return kernel(B, out=out)
