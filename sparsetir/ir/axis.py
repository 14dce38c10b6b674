"""Axes: the structure of a sparse iteration space (Stage I).

An axis is *dense* (every coordinate is stored) or *sparse* (stored coordinates
are listed in an ``indices`` array), and *fixed* (the same number of positions
under every parent position) or *variable* (an ``indptr`` array gives the range
of positions under each parent position). A child axis hangs under its parent;
a chain of axes (``I -> J``) describes one level of a compressed format:

    I = dense_fixed("I", m)                    # rows 0..m-1
    J = sparse_variable("J", I, n, nnz)        # CSR columns: J_indptr, J_indices

The metadata arrays (``indptr``/``indices``) belong to the axis, not to the
values, so several sparse buffers can share one axis tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import tirx

INDEX_DTYPES = ("int32", "int64")

DENSE_FIXED = "dense_fixed"
DENSE_VARIABLE = "dense_variable"
SPARSE_FIXED = "sparse_fixed"
SPARSE_VARIABLE = "sparse_variable"


def size_var(name: str, dtype: str = "int32") -> tirx.Var:
    """A symbolic size (rows, columns, non-zeros, ...) bound when the kernel runs."""
    _check_index_dtype(dtype)
    return tirx.Var(name, dtype)


def size_vars(names: str, dtype: str = "int32") -> tuple[tirx.Var, ...]:
    """``size_vars("m n nnz")`` -> three symbolic sizes."""
    return tuple(size_var(name, dtype) for name in names.split())


def _check_index_dtype(dtype: str) -> None:
    if dtype not in INDEX_DTYPES:
        raise TypeError(f"index dtype must be one of {INDEX_DTYPES}, got {dtype!r}")


def expr_dtype(expr) -> str:
    """The dtype string of a TIR expression (or of a Python int/float)."""
    if isinstance(expr, bool):
        return "bool"
    if isinstance(expr, int):
        return "int32"
    if isinstance(expr, float):
        return "float32"
    return str(expr.ty)


def _as_size(value, idtype: str, what: str):
    """Normalise a size argument to a TIR expression of the index dtype."""
    if isinstance(value, bool) or value is None:
        raise TypeError(f"{what} must be an int or a size_var, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{what} must be >= 0, got {value}")
        return tirx.const(value, idtype)
    if isinstance(value, str):
        raise TypeError(f"{what}: use sparsetir.ir.size_var({value!r}) so axes can share the size")
    if not isinstance(value, tirx.Expr):
        raise TypeError(f"{what} must be an int or a TIR expression, got {type(value).__name__}")
    if expr_dtype(value) != idtype:
        raise TypeError(f"{what} has dtype {expr_dtype(value)}, but the axis index dtype is {idtype}")
    return value


@dataclass(eq=False)
class Axis:
    """One axis of an iteration space. Build axes with the four constructors below."""

    name: str
    kind: str
    length: tirx.Expr  # coordinate range: coordinates lie in [0, length)
    idtype: str
    parent: Axis | None = None
    nnz: tirx.Expr | None = None  # variable axes: positions summed over all parent positions
    nnz_cols: tirx.Expr | None = None  # sparse_fixed: positions under each parent position
    indptr: tirx.Var | None = field(default=None, repr=False)  # a tirx buffer
    indices: tirx.Var | None = field(default=None, repr=False)  # a tirx buffer
    distinct: bool = False  # sparse axes: no coordinate repeats within one parent position
    disjoint: bool = False  # sparse child axes: no coordinate occurs under two parent positions

    @property
    def is_sparse(self) -> bool:
        return self.kind in (SPARSE_FIXED, SPARSE_VARIABLE)

    @property
    def is_variable(self) -> bool:
        return self.kind in (DENSE_VARIABLE, SPARSE_VARIABLE)

    @property
    def chain_distinct(self) -> bool:
        """Distinct positions of the whole chain (this axis with its ancestors' positions) give
        distinct coordinates: a dense root, a distinct sparse root, or a distinct and disjoint
        sparse child (e.g. the row ids of a row-partitioned CSR, each row in one part)."""
        if self.parent is None:
            return self.kind == DENSE_FIXED or self.distinct
        return self.is_sparse and self.distinct and self.disjoint

    def chain(self) -> list[Axis]:
        """This axis and its ancestors, root first."""
        out = [self]
        while out[0].parent is not None:
            out.insert(0, out[0].parent)
        return out

    def chain_size(self) -> tirx.Expr:
        """Number of positions of this axis summed over its whole chain."""
        if self.parent is None:
            return self.nnz_cols if self.kind == SPARSE_FIXED else self.length
        if self.is_variable:
            return self.nnz
        return self.parent.chain_size() * self.nnz_cols

    def metadata(self) -> list[tirx.Var]:
        """The metadata buffers of this axis: indptr and/or indices."""
        return [b for b in (self.indptr, self.indices) if b is not None]

    def __repr__(self) -> str:
        return f"Axis({self.name}, {self.kind})"


def _metadata_buffer(shape, idtype: str, name: str) -> tirx.Var:
    return tirx.decl_buffer(shape, idtype, name, data_alignment=16)


def _child_dtype(parent: Axis, idtype: str | None) -> str:
    if not isinstance(parent, Axis):
        raise TypeError(f"parent must be an Axis, got {type(parent).__name__}")
    idtype = idtype or parent.idtype
    _check_index_dtype(idtype)
    if idtype != parent.idtype:
        raise TypeError(f"axis index dtype {idtype} differs from its parent {parent.name}'s {parent.idtype}")
    return idtype


def dense_fixed(name: str, length, idtype: str = "int32") -> Axis:
    """A dense axis of ``length`` coordinates; it has no parent."""
    _check_index_dtype(idtype)
    return Axis(name, DENSE_FIXED, _as_size(length, idtype, f"{name}.length"), idtype)


def dense_variable(name: str, parent: Axis, length, nnz, idtype: str | None = None) -> Axis:
    """A dense axis whose extent varies per parent position (a ragged dimension).

    Metadata: ``<name>_indptr`` with one entry per parent position plus one.
    """
    idtype = _child_dtype(parent, idtype)
    axis = Axis(name, DENSE_VARIABLE, _as_size(length, idtype, f"{name}.length"), idtype, parent,
                nnz=_as_size(nnz, idtype, f"{name}.nnz"))
    axis.indptr = _metadata_buffer((parent.chain_size() + 1,), idtype, f"{name}_indptr")
    return axis


def sparse_fixed(name: str, parent: Axis | None, length, nnz_cols, idtype: str | None = None, *,
                 distinct: bool = False, disjoint: bool = False) -> Axis:
    """A sparse axis with ``nnz_cols`` stored coordinates under every parent position (ELL).

    Metadata: ``<name>_indices``. With ``parent=None`` it is a root axis listing ``nnz_cols``
    coordinates, for example the rows one bucket of a hybrid format holds. ``distinct``
    promises that no coordinate repeats under one parent position (the kernels rely on it
    when they write outputs in parallel). ``disjoint`` (a child axis) promises that no
    coordinate occurs under two parent positions. Binary searches need indices sorted per parent.
    """
    _check_disjoint(name, parent, disjoint)
    if parent is None:
        idtype = idtype or "int32"
        _check_index_dtype(idtype)
    else:
        idtype = _child_dtype(parent, idtype)
    axis = Axis(name, SPARSE_FIXED, _as_size(length, idtype, f"{name}.length"), idtype, parent,
                nnz_cols=_as_size(nnz_cols, idtype, f"{name}.nnz_cols"), distinct=distinct, disjoint=disjoint)
    axis.indices = _metadata_buffer((axis.chain_size(),), idtype, f"{name}_indices")
    return axis


def sparse_variable(name: str, parent: Axis, length, nnz, idtype: str | None = None, *,
                    distinct: bool = False, disjoint: bool = False) -> Axis:
    """A sparse axis with a varying number of stored coordinates per parent position (CSR).

    Metadata: ``<name>_indptr`` (parent positions + 1) and ``<name>_indices`` (nnz).
    ``distinct``: no coordinate repeats within one parent position; ``disjoint``: no coordinate
    occurs under two parent positions. With both, every position of the chain has its own
    coordinate, so writes through this axis from different parent positions never collide
    (the rows of a row-partitioned CSR: parts -> the rows of each part).
    """
    _check_disjoint(name, parent, disjoint)
    idtype = _child_dtype(parent, idtype)
    axis = Axis(name, SPARSE_VARIABLE, _as_size(length, idtype, f"{name}.length"), idtype, parent,
                nnz=_as_size(nnz, idtype, f"{name}.nnz"), distinct=distinct, disjoint=disjoint)
    axis.indptr = _metadata_buffer((parent.chain_size() + 1,), idtype, f"{name}_indptr")
    axis.indices = _metadata_buffer((axis.nnz,), idtype, f"{name}_indices")
    return axis


def _check_disjoint(name: str, parent, disjoint: bool) -> None:
    if disjoint and parent is None:
        raise ValueError(f"axis {name}: disjoint describes a child axis (coordinates of different parent "
                         f"positions); a root axis has one parent position, use distinct")


@dataclass(frozen=True, eq=False)
class FusedAxis:
    """Several consecutive axes iterated by one loop (made by ``sparse_fuse``)."""

    axes: tuple[Axis, ...]

    @property
    def name(self) -> str:
        return "_".join(axis.name for axis in self.axes)

    def __repr__(self) -> str:
        return f"fuse({', '.join(axis.name for axis in self.axes)})"


def fuse(*axes: Axis) -> FusedAxis:
    """Group axes so that one loop iterates all of them (see ``transform.sparse_fuse``)."""
    if len(axes) < 2:
        raise ValueError("fuse needs at least two axes")
    for axis in axes:
        if not isinstance(axis, Axis):
            raise TypeError(f"fuse takes axes, got {type(axis).__name__}")
    return FusedAxis(tuple(axes))
