"""Math for Stage I bodies: ``exp``, ``log``, ``sqrt``, ``max``, ``min``, ``where``, ``cast``.

They build TIR expressions, so a body reads like numpy::

    @sparse_iteration([I, J], "SR")
    def rowmax(i, j):
        mx[i] = ir.max(mx[i], E[i, j])          # a max reduction (see iteration.py)

    @sparse_iteration([I, J], "SS")
    def normalise(i, j):
        P[i, j] = ir.exp(E[i, j] - mx[i]) / s[i]

Python numbers take the dtype of the other operand; two expressions of different dtypes are a
``TypeError`` (use ``cast``).
"""

from __future__ import annotations

from tvm import tirx

from .axis import expr_dtype

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _expr(x, dtype: str | None = None):
    if isinstance(x, tirx.Expr):
        return x
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"expected a number or an expression, got {type(x).__name__}")
    return tirx.const(x, dtype or ("float32" if isinstance(x, float) else "int32"))


def _pair(a, b, what: str):
    """``a`` and ``b`` as expressions of one dtype (a Python number takes the other's)."""
    if isinstance(a, tirx.Expr) and not isinstance(b, tirx.Expr):
        b = _expr(b, expr_dtype(a))
    elif isinstance(b, tirx.Expr) and not isinstance(a, tirx.Expr):
        a = _expr(a, expr_dtype(b))
    else:
        a, b = _expr(a), _expr(b)
    if expr_dtype(a) != expr_dtype(b):
        raise TypeError(f"{what}: operands of dtypes {expr_dtype(a)} and {expr_dtype(b)}; cast one (ir.cast)")
    return a, b


def _floating(x, what: str):
    x = _expr(x)
    if expr_dtype(x) not in FLOAT_DTYPES:
        raise TypeError(f"{what} takes a floating-point value, got {expr_dtype(x)}; cast it first (ir.cast)")
    return x


def exp(x):
    """``e ** x`` (floating point)."""
    return tirx.exp(_floating(x, "exp"))


def log(x):
    """The natural logarithm (floating point)."""
    return tirx.log(_floating(x, "log"))


def sqrt(x):
    """The square root (floating point)."""
    return tirx.sqrt(_floating(x, "sqrt"))


def max(a, b):  # noqa: A001 - the name users expect, as numpy's maximum
    """The larger of ``a`` and ``b``; ``C[i] = max(C[i], x)`` in an iteration is a max reduction."""
    return tirx.Max(*_pair(a, b, "max"))


def min(a, b):  # noqa: A001 - the name users expect, as numpy's minimum
    """The smaller of ``a`` and ``b``; ``C[i] = min(C[i], x)`` in an iteration is a min reduction."""
    return tirx.Min(*_pair(a, b, "min"))


def where(condition, a, b):
    """``a`` where ``condition`` holds, else ``b`` (only the chosen one is evaluated); ``x == y`` and
    ``x != y`` are conditions too."""
    if type(condition).__name__ in ("EqualOp", "NotEqualOp") and hasattr(condition, "asobject"):
        condition = condition.asobject()  # TVM keeps == and != lazy (for hashing); as a condition, compare
    if not isinstance(condition, tirx.Expr) or expr_dtype(condition) != "bool":
        raise TypeError(f"where: the condition must be a boolean expression, got {condition!r}")
    a, b = _pair(a, b, "where")
    return tirx.if_then_else(condition, a, b)


def cast(x, dtype: str):
    """``x`` converted to ``dtype`` (e.g. ``"float32"`` to accumulate a float16 product)."""
    x = _expr(x)
    dtype = str(dtype).replace("torch.", "")
    return x if expr_dtype(x) == dtype else tirx.Cast(dtype, x)
