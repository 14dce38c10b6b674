"""SDDMM, ``A.data * (X[i] . Y[j])`` on A's pattern, composed from the IR (no template).

Stage I over CSR: ``C[i, j] += A[i, j] * X[i, k] * Y[j, k]`` over ``[I, J, K]`` with
kinds "SSR". With the knob ``sparse_fuse`` (default: on CUDA), ``sparse_fuse(I, J)`` makes it
one parallel loop over the non-zeros, each finding its row by binary search; without it (the
CPU default) rows run in parallel, each over its own non-zeros, and the CPU template
vectorises the ``k`` reduction (knob ``reduce_lanes``). On the CPU it prefetches Y's rows 16
non-zeros ahead unless the knob ``prefetch`` says otherwise. Other formats rewrite it with
``format_decompose``; each sub-format writes its own output, gathered back into CSR order.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import transform
from ..formats import read_sparse_input
from ..formats.structure import SourceAxes
from ..ir import SparseBuffer, SparseFunction, sparse_iteration
from ..reference.sddmm import SDDMM_REFERENCE
from ..runtime.kernel import Kernel
from ..runtime.marshal import is_torch
from ..schedule.knobs import Knob, optional_boolean, register_knob
from .operands import check_dense_operand, check_op_knobs, compose_format, csr_operand_axes, make_kernel, prepare_op
from .prepared import PREPARED, options_key
from .registry import OpSpec, register_op

register_knob(Knob("sparse_fuse", ("cpu", "cuda"), None, (None, True), optional_boolean("sparse_fuse"),
                   "fuse rows and non-zeros into one loop (transform.sparse_fuse; None: on CUDA); needs a format "
                   "the op runs on unchanged (csr)", scope="op", requires=lambda value, fmt, device: not (
                       value and fmt.rewrites),
                   requirement="sparse_fuse=True needs the csr format (one loop over its non-zeros)"))


def sddmm_function(fmt, feat: int, dtype: str = "float32", idtype: str = "int32", device: str = "cpu",
                   horizontal_fuse=None, sparse_fuse=None, accum_dtype: str | None = None) -> SparseFunction:
    """The Stage I SDDMM in ``fmt`` with ``feat``-long rows in X and Y.

    ``sparse_fuse`` (CSR only; default True, as in the paper; ``compile_sddmm`` passes False on
    the CPU): fuse rows and columns into one loop over the non-zeros (``transform.sparse_fuse``).
    """
    check_op_knobs({"sparse_fuse": sparse_fuse}, fmt, device)
    axes = csr_operand_axes(feat, idtype)
    rows, cols, features = axes.rows, axes.cols, axes.features
    A = SparseBuffer("A", (rows, cols), dtype)
    X = SparseBuffer("X", (rows, features), dtype)
    Y = SparseBuffer("Y", (axes.dense_cols, features), dtype)
    C = SparseBuffer("C", (rows, cols), dtype)

    @sparse_iteration([rows, cols, features], "SSR", name="sddmm", accum_dtype=accum_dtype)
    def sddmm(i, j, k):
        C[i, j] += A[i, j] * X[i, k] * Y[j, k]

    func = SparseFunction("sddmm", [sddmm], params=[A, X, Y, C])
    if not fmt.rewrites:
        return func if sparse_fuse is False else transform.sparse_fuse(func, [rows, cols])
    return compose_format(func, fmt, SourceAxes(rows, cols, [A, C], "S", "S"), device, fuse=horizontal_fuse,
                          disjoint_outputs=True)


def compile_sddmm(A, feat, *, format="csr", target="llvm", dtype=None, index_dtype=None, **knobs) -> Kernel:
    """Compile SDDMM for A's structure (duplicates summed).

    Parameters are those of :func:`~sparsetir.ops.spmm.compile_spmm`, ``feat`` being the length of
    the rows of X and Y. The kernel is called as ``kernel(X, Y, out=None, values=None)``; its
    output holds one value per stored entry of the canonical A (``kernel.matrix``), in CSR order.
    """
    p, knobs = prepare_op("sddmm", A, feat, format=format, target=target, dtype=dtype, index_dtype=index_dtype,
                          knobs=knobs, canonical=True)
    fuse, fuse_nonzeros = knobs.get("horizontal_fuse"), knobs.get("sparse_fuse")
    if fuse_nonzeros is None:  # the CPU runs rows in parallel (no per-non-zero row search)
        fuse_nonzeros = not p.fmt.rewrites and p.device == "cuda"
    kernel = make_kernel("sddmm", lambda: sddmm_function(p.fmt, p.feat, p.dtype, p.idtype, p.device, fuse,
                                                         sparse_fuse=fuse_nonzeros,
                                                         accum_dtype=knobs.get("accum_dtype")), p,
                         knobs=knobs, inputs=["X", "Y"], output="C", output_per_slot=True)
    kernel.matrix = p.matrix
    return kernel


def sddmm(A, X, Y, *, format="csr", target="llvm", **knobs):
    """SDDMM on A's pattern: ``A.data * (X[i] . Y[j])`` for every stored entry ``(i, j)``.

    Parameters
    ----------
    A : scipy.sparse matrix or torch sparse CSR/COO tensor
        The pattern (duplicates summed first; explicit zeros kept).
    X, Y : numpy arrays or torch tensors
        ``(m, k)`` and ``(n, k)``, of one dtype and type.
    format, target, **knobs
        As for :func:`compile_sddmm`.

    Returns
    -------
    scipy CSR matrix or torch sparse CSR tensor
        Of A's (canonical) pattern: scipy for scipy A, torch for torch A or X.
    """
    dtype = check_dense_operand(X, "X")
    if check_dense_operand(Y, "Y") != dtype:
        raise TypeError(f"X and Y must share a dtype, got {dtype} and {Y.dtype}")
    if type(X) is not type(Y):
        raise TypeError("X and Y must both be numpy arrays or both torch tensors")
    if is_torch(X):  # through torch.ops.sparsetir.sddmm: differentiable in X, Y and a torch A's values
        return SDDMM.front_end("torch")(A, X, Y, format=format, target=target, **knobs)
    matrix = read_sparse_input(A, canonical=True)
    m, n = matrix.shape
    if X.shape[0] != m or Y.shape[0] != n:
        raise ValueError(f"A is {m}x{n}, so X needs {m} rows and Y {n} rows; got {X.shape[0]} and {Y.shape[0]}")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must have the same number of columns, got {X.shape[1]} and {Y.shape[1]}")
    key = options_key("sddmm", matrix.shape, int(X.shape[1]), dtype, np.dtype(matrix.values.dtype).str, format,
                      target, knobs)
    kernel = PREPARED.get(key, (matrix.indptr, matrix.indices, matrix.values), lambda: compile_sddmm(
        matrix, int(X.shape[1]), format=format, target=target, dtype=dtype, **knobs))
    values = kernel(X, Y)
    structure = matrix  # this call's (equal to the cached one's, which A's owner may since have edited)
    if is_torch(A) or is_torch(X):
        import torch  # noqa: PLC0415 - torch loads only for torch inputs (the runtime runs numpy without it)

        device = values.device if is_torch(values) else "cpu"
        return torch.sparse_csr_tensor(
            torch.tensor(np.asarray(structure.indptr), dtype=torch.int64, device=device),  # copies: the result
            torch.tensor(np.asarray(structure.indices), dtype=torch.int64, device=device),  # owns its structure
            values if is_torch(values) else torch.as_tensor(values),
            size=structure.shape,
        )
    # copies: the result owns its structure (A's arrays stay A's)
    return sp.csr_matrix((values, structure.indices.copy(), structure.indptr.copy()), shape=structure.shape)


SDDMM = register_op(OpSpec("sddmm", function=sddmm_function, compile=compile_sddmm, call=sddmm,
                           reference=SDDMM_REFERENCE,
                           knobs={"cpu": {"reduce_lanes": ..., "prefetch": 16, "sparse_fuse": ..., "specialize": ...},
                                  "cuda": {"threads": ..., "specialize": ...}}))

__all__ = ["compile_sddmm", "sddmm", "sddmm_function"]
