"""Padding slots of a format's value arrays, and the guard that keeps them out of a reduction.

A padded format (ELL, hyb buckets, BSR and DBSR blocks, SR-BCRS groups, ELL3D) stores each
non-zero of A in a *slot* of its value arrays and fills the rest with padding. A padding slot
still points at a row of the dense operand (ELL: column 0; a block: every column of the block),
so ``C[i, k] += A[slot] * B[col, k]`` would multiply its 0 by ``B[col, k]``: a NaN or an infinity
there would reach rows that do not depend on it (``0 * nan`` is NaN), unlike ``torch.sparse.mm``.

The rule (``docs/nan-semantics.md``): a padding slot holds **-0.0** in a floating value array,
a stored zero holds +0.0 (the host side writes both: ``runtime.slot_layout.mark_padding``), and
a reduction whose value reads a padded value array contributes the reducer's identity for a
slot holding -0.0 (``format_decompose`` adds :func:`guard_padding` to such a store; both sides
of the guard are safe to evaluate, since a padding slot's column is a valid one). Storing +0.0
for an explicit -0.0 changes no output: ``-0 * x`` and ``+0 * x`` differ at most in the sign of
a zero, which a sum started from +0 drops, and are both NaN for a non-finite ``x``.

Before (the ELL part of SpMM, Stage I)::

    C[i, k] += A_ell[i, j_ell] * B[j_ell, k]

After ``guard_padding`` (a sum: the product's bits masked by all ones, or by 0 in padding)::

    C[i, k] += A_ell[i, j_ell] * reinterpret_float32(reinterpret_uint32(B[j_ell, k])
                                   & uint32(reinterpret_uint32(A_ell[i, j_ell]) != 0x80000000) * 0xffffffff)
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from .axis import expr_dtype

#: The value bits of -0.0 per floating dtype (the sign bit alone).
_SIGN_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def is_floating(dtype: str) -> bool:
    return str(dtype) in _SIGN_BITS


def stored_slot(value) -> tirx.Expr:
    """True where the value-array load ``value`` is a stored entry, False in a padding slot (-0.0)."""
    bits = _SIGN_BITS[expr_dtype(value)]
    word = f"uint{bits}"
    return tirx.NE(tirx.reinterpret(word, value), tirx.const(1 << (bits - 1), word))


def guard_padding(value, slot, identity) -> tirx.Expr:
    """``value`` where ``slot`` (a load of a padded value array) is stored, else ``identity``.

    For a sum (identity 0) the value's bits are masked: ``value & mask(slot)``, the mask all ones for a
    stored slot and 0 in padding; a product ``slot * rest`` masks ``rest`` (``-0.0 * +0.0`` adds nothing),
    so the sum stays one fused multiply-add. It is computed from the slot alone (hoisted out of the feature loop),
    costs one AND per vector and keeps the feature loop free of branches; an ``if_then_else`` there
    became a branch per vector in TVM's LLVM code (SpMM in ELL and BSR 1.3-2x slower) and a vectorised
    ``Select`` does not build for CUDA (TVM 0.27 writes its broadcast condition as a vector of the value
    type). Another identity (max, min) takes an ``if_then_else``."""
    dtype = expr_dtype(value)
    if identity != 0:
        return tirx.if_then_else(stored_slot(slot), value, tirx.const(identity, dtype))
    word = f"uint{_SIGN_BITS[dtype]}"
    ones = tirx.const((1 << _SIGN_BITS[dtype]) - 1, word)
    mask = tirx.Cast(word, stored_slot(slot)) * ones  # (TVM's simplifier folds an unsigned 0 - 1 to 0)

    def masked(x):
        return tirx.reinterpret(dtype, tirx.bitwise_and(tirx.reinterpret(word, x), mask))

    if isinstance(value, tirx.Mul):  # slot * rest: mask the rest, so the product stays one FMA with the sum
        if value.a.same_as(slot) or tvm_ffi.structural_equal(value.a, slot):
            return tirx.Mul(value.a, masked(value.b))  # -0.0 * +0.0 is -0.0: adds nothing
        if value.b.same_as(slot) or tvm_ffi.structural_equal(value.b, slot):
            return tirx.Mul(masked(value.a), value.b)
    return masked(value)


def is_padding_guard(expr) -> bool:
    """Whether ``expr`` is an ``if_then_else`` made by :func:`guard_padding` (its branches are both safe
    to evaluate, unlike a bounds guard: ``schedule.prefetch`` looks into it; the masked sum has no
    condition to look past)."""
    if getattr(getattr(expr, "op", None), "name", "") != "tirx.if_then_else":
        return False
    condition = expr.args[0]
    if not (isinstance(condition, tirx.NE) and isinstance(condition.b, tirx.IntImm)
            and getattr(getattr(condition.a, "op", None), "name", "") == "tirx.reinterpret"):
        return False
    word = expr_dtype(condition.b)
    return word.startswith("uint") and condition.b.value == 1 << (int(word[4:]) - 1)
