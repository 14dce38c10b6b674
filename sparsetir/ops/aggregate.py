"""Max and min aggregation over a CSR structure, and their gradient with ties split as PyG's.

Three Stage I functions over the CSR axes every op shares (``operands.csr_operand_axes``),
composed from the IR like SpMM (no template), each compiled once per (reducer, feat, dtype,
index dtype, target) with symbolic sizes:

- ``reduce``: ``C[i, k] = max(C[i, k], B[j, k])`` (or min) over row ``i``'s entries ``j``, from the
  reduction's identity (-inf / +inf): an empty row keeps it, and the caller sets it to 0;
- ``ties``: ``N[i, k] += where(B[j, k] == C[i, k], 1, 0)``: how many entries reach the row's result;
- ``spread``: over A^T, ``D[j, k] += where(X[j, k] == C[i, k], G[i, k], 0)``: each source gets the
  gradient of every target it is the max (min) of.

PyG aggregates max/min on the CPU with ``scatter_reduce(reduce="amax", include_self=False)`` into
zeros, whose backward splits a target's gradient evenly among the entries equal to its result and
counts the zero it started from as one more when the result is 0 (torch's formula compares the
untouched zeros too). :func:`~sparsetir.ops.torch_aggregate` divides by exactly that count, so
the gradients equal PyG's, ties included.

Two more give the mean without a value array: ``rows``, ``C[i, k] += S[i] * B[j, k]`` (``S = 1 /
degree``, a row scale in the reduction), and its gradient ``columns`` over A^T, ``D[j, k] += S[i] *
G[i, k]``.

Two more apply an input dropout inside the mean (``sparsetir.nn.GraphSAGE`` in training mode):
``rows_masked``, ``C[i, k] += S[i] * B[j, k] * M[j, k]`` with ``M`` the uint8 keep mask of ``B``
(1 kept, 0 dropped; the dropout's ``1 / (1 - p)`` folded into ``S``), so the dropped copy of ``B``
is never written, and its gradient ``columns_masked`` over A^T, ``D[j, k] += S[i] * G[i, k] *
M[j, k]``, which masks the gradient as it reduces it.
"""

from __future__ import annotations

from ..backend import normalize_target
from ..formats import CSR
from ..ir import SparseBuffer, SparseFunction, cast, sparse_iteration, where
from ..ir import max as ir_max
from ..ir import min as ir_min
from ..runtime.kernel import Kernel
from .operands import compiled_function, csr_operand_axes

__all__ = ["MASK_DTYPE", "REDUCERS", "aggregation_kernel", "column_scaled_function",
           "masked_column_scaled_function", "masked_row_scaled_function", "reduce_function", "row_scaled_function",
           "spread_function", "ties_function"]

REDUCERS = {"max": ir_max, "min": ir_min}
_INPUTS = {"reduce": (["B"], "C"), "ties": (["B", "C"], "N"), "spread": (["X", "C", "G"], "D"),
           "rows": (["B", "S"], "C"), "columns": (["G", "S"], "D"),
           "rows_masked": (["B", "M", "S"], "C"), "columns_masked": (["G", "M", "S"], "D")}
MASK_DTYPE = "uint8"  # a keep mask: 1 kept, 0 dropped (torch's bool mask viewed as uint8)


def _equal(a, b):
    """``a == b`` as a boolean expression (TVM's ``==`` on expressions builds an ``EqualOp``)."""
    from tvm import tirx  # noqa: PLC0415 - the compiler's expression types

    return tirx.EQ(a, b)


def reduce_function(reducer: str, feat: int, dtype: str = "float32", idtype: str = "int32") -> SparseFunction:
    """``C[i, k] = reducer(C[i, k], B[j, k])`` over A's entries (from the identity)."""
    axes = csr_operand_axes(feat, idtype)
    B = SparseBuffer("B", (axes.dense_cols, axes.features), dtype)
    C = SparseBuffer("C", (axes.rows, axes.features), dtype)
    combine = REDUCERS[reducer]

    @sparse_iteration([axes.rows, axes.cols, axes.features], "SRS", name=f"aggregate_{reducer}")
    def aggregate(i, j, k):
        C[i, k] = combine(C[i, k], B[j, k])

    return SparseFunction(f"aggregate_{reducer}", [aggregate], params=[B, C])


def ties_function(feat: int, dtype: str = "float32", idtype: str = "int32") -> SparseFunction:
    """``N[i, k] = #{j in row i : B[j, k] == C[i, k]}``."""
    axes = csr_operand_axes(feat, idtype)
    B = SparseBuffer("B", (axes.dense_cols, axes.features), dtype)
    C = SparseBuffer("C", (axes.rows, axes.features), dtype)
    N = SparseBuffer("N", (axes.rows, axes.features), dtype)

    @sparse_iteration([axes.rows, axes.cols, axes.features], "SRS", name="aggregate_ties")
    def ties(i, j, k):
        N[i, k] += where(_equal(B[j, k], C[i, k]), 1.0, 0.0)

    return SparseFunction("aggregate_ties", [ties], params=[B, C, N])


def spread_function(feat: int, dtype: str = "float32", idtype: str = "int32") -> SparseFunction:
    """Over A^T (row ``j`` = a source, its entries the targets ``i``):
    ``D[j, k] = sum_i where(X[j, k] == C[i, k], G[i, k], 0)``."""
    axes = csr_operand_axes(feat, idtype)
    X = SparseBuffer("X", (axes.rows, axes.features), dtype)
    C = SparseBuffer("C", (axes.dense_cols, axes.features), dtype)
    G = SparseBuffer("G", (axes.dense_cols, axes.features), dtype)
    D = SparseBuffer("D", (axes.rows, axes.features), dtype)

    @sparse_iteration([axes.rows, axes.cols, axes.features], "SRS", name="aggregate_spread")
    def spread(j, i, k):
        D[j, k] += where(_equal(X[j, k], C[i, k]), G[i, k], 0.0)

    return SparseFunction("aggregate_spread", [spread], params=[X, C, G, D])


def row_scaled_function(feat: int, dtype: str = "float32", idtype: str = "int32", masked: bool = False
                        ) -> SparseFunction:
    """``C[i, k] = S[i] * sum_j B[j, k]`` over A's entries: a mean (``S = 1 / degree``) with no value
    array, the row scale applied in the reduction. ``masked``: ``B[j, k] * M[j, k]`` instead, ``M`` a
    dropout's keep mask of B (uint8, one per entry), read as B's rows are gathered (``rows_masked``)."""
    axes = csr_operand_axes(feat, idtype)
    B = SparseBuffer("B", (axes.dense_cols, axes.features), dtype)
    M = SparseBuffer("M", (axes.dense_cols, axes.features), MASK_DTYPE) if masked else None
    S = SparseBuffer("S", (axes.rows,), dtype)
    C = SparseBuffer("C", (axes.rows, axes.features), dtype)
    name = "aggregate_rows_masked" if masked else "aggregate_rows"

    @sparse_iteration([axes.rows, axes.cols, axes.features], "SRS", name=name)
    def rows(i, j, k):
        C[i, k] += S[i] * ((B[j, k] * cast(M[j, k], dtype)) if masked else B[j, k])

    return SparseFunction(name, [rows], params=[B, M, S, C] if masked else [B, S, C])


def column_scaled_function(feat: int, dtype: str = "float32", idtype: str = "int32", masked: bool = False
                           ) -> SparseFunction:
    """Over A^T (row ``j`` a source, its entries the targets ``i``): ``D[j, k] = sum_i S[i] * G[i, k]``,
    the gradient of :func:`row_scaled_function` in B; ``masked``: ``M[j, k]`` times it, masked in the
    same reduction (``columns_masked``, the gradient of the masked product)."""
    axes = csr_operand_axes(feat, idtype)
    G = SparseBuffer("G", (axes.dense_cols, axes.features), dtype)
    M = SparseBuffer("M", (axes.rows, axes.features), MASK_DTYPE) if masked else None
    S = SparseBuffer("S", (axes.dense_cols,), dtype)
    D = SparseBuffer("D", (axes.rows, axes.features), dtype)
    name = "aggregate_columns_masked" if masked else "aggregate_columns"

    @sparse_iteration([axes.rows, axes.cols, axes.features], "SRS", name=name)
    def columns(j, i, k):
        D[j, k] += S[i] * ((G[i, k] * cast(M[j, k], dtype)) if masked else G[i, k])

    return SparseFunction(name, [columns], params=[G, M, S, D] if masked else [G, S, D])


def masked_row_scaled_function(feat: int, dtype: str = "float32", idtype: str = "int32") -> SparseFunction:
    """:func:`row_scaled_function` under a dropout's keep mask ``M`` of B (``rows_masked``)."""
    return row_scaled_function(feat, dtype, idtype, masked=True)


def masked_column_scaled_function(feat: int, dtype: str = "float32", idtype: str = "int32") -> SparseFunction:
    """:func:`column_scaled_function` masked by ``M`` in the same reduction (``columns_masked``)."""
    return column_scaled_function(feat, dtype, idtype, masked=True)


def aggregation_kernel(stage: str, reducer: str, matrix, feat: int, dtype: str, target: dict) -> Kernel:
    """``stage`` (``"reduce"``, ``"ties"``, ``"spread"``, ``"rows"``, ``"columns"``, ``"rows_masked"``
    or ``"columns_masked"``) bound to ``matrix`` (a validated ``CSRMatrix`` whose index arrays are the
    kernel's index dtype; A^T's for ``"spread"``, ``"columns"`` and ``"columns_masked"``);
    ``target``: ``"llvm"``, ``"cuda"`` or a TVM target dict."""
    idtype = str(matrix.indptr.dtype)
    target = normalize_target(target)
    fmt = CSR()
    builders = {"reduce": lambda: reduce_function(reducer, feat, dtype, idtype),
                "ties": lambda: ties_function(feat, dtype, idtype),
                "spread": lambda: spread_function(feat, dtype, idtype),
                "rows": lambda: row_scaled_function(feat, dtype, idtype),
                "columns": lambda: column_scaled_function(feat, dtype, idtype),
                "rows_masked": lambda: masked_row_scaled_function(feat, dtype, idtype),
                "columns_masked": lambda: masked_column_scaled_function(feat, dtype, idtype)}
    name = f"aggregate_{stage}" + (f"_{reducer}" if stage == "reduce" else "")
    sizes = fmt.sizes(matrix)
    function = compiled_function(name, builders[stage], fmt, feat, dtype, idtype, target, {}, sizes)
    inputs, output = _INPUTS[stage]
    spec = {"op": name, "format": repr(fmt), "feat": feat, "dtype": dtype, "index_dtype": idtype,
            "inputs": inputs, "outputs": [output], "values": []}
    return Kernel(function, spec, {"J_indptr": matrix.indptr, "J_indices": matrix.indices}, sizes)
