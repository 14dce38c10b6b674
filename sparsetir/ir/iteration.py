"""Sparse iterations: a loop nest over axes, with "S"/"R" kinds, an init and a body (Stage I).

Write the body as an ordinary Python function over coordinate iterators::

    @sparse_iteration([I, J, K], "SRS")
    def spmm(i, j, k):
        C[i, k] += A[i, j] * B[j, k]

Reductions over the "R" axes: ``C[i] += x`` is a sum, ``C[i] = ir.max(C[i], x)`` a max and
``C[i] = ir.min(C[i], x)`` a min. The output first holds the reduction's identity (0, -inf,
+inf) unless ``init`` says otherwise (a number; ``init=None`` reduces into what the output
already holds); ``init_scope="written"``: only the elements the spatial loops address start
from ``init``, for sub-formats that own their rows. Plain ``=`` stores need no "R" axis.
``atomic=True``: parallel instances of the iteration may update the same element (sub-formats
fused into one launch, split rows, a relation or scatter loop outermost); its reductions are
then atomic on CUDA, and on the CPU the loops whose instances may collide stay serial.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import tvm_ffi
from tvm import tirx
from tvm.ir.expr import TensorLoad

from .axis import Axis, FusedAxis, expr_dtype
from .buffer import SparseBuffer, recording

KINDS = ("S", "R")
# init scopes: the whole output starts from init, or only the elements the spatial loops address
OUTPUT, WRITTEN = "output", "written"
REDUCERS = ("sum", "max", "min")
ACCUM_DTYPES = ("float32", "float64")


class _Identity:
    """The default ``init``: each reduction starts from its identity (0, -inf, +inf)."""

    def __repr__(self) -> str:
        return "identity"


IDENTITY = _Identity()


def reducer_identity(reducer: str, dtype: str):
    """The value a ``reducer`` ("sum", "max", "min") starts from, as a Python number."""
    if reducer == "sum":
        return 0
    floating = dtype.startswith(("float", "bfloat"))
    if reducer == "max":
        return -math.inf if floating else int(tirx.min_value(dtype).value)
    if reducer == "min":
        return math.inf if floating else int(tirx.max_value(dtype).value)
    raise ValueError(f"unknown reducer {reducer!r}; expected one of {REDUCERS}")


@dataclass(frozen=True, eq=False)
class SparseStore:
    """``buffer[indices] = value``, or a reduction into it: ``reducer`` "sum" (``+=``), "max"
    (``= ir.max(buffer[indices], value)``) or "min"."""

    buffer: SparseBuffer
    indices: tuple
    value: tirx.Expr
    reducer: str | None = None

    def __post_init__(self):
        if self.reducer is not None and self.reducer not in REDUCERS:
            raise ValueError(f"reducer must be one of {REDUCERS} or None, got {self.reducer!r}")

    @property
    def accumulate(self) -> bool:
        """A reduction into the target (any reducer)."""
        return self.reducer is not None


class SparseIteration:
    """One sparse iteration. ``groups`` are Axis or FusedAxis loops, outermost first."""

    def __init__(self, name: str, groups, kinds: str, iter_vars, stores, init, buffers, atomic: bool = False,
                 init_scope: str = OUTPUT, accum_dtype: str | None = None):
        if init_scope not in (OUTPUT, WRITTEN):
            raise ValueError(f"init_scope must be {OUTPUT!r} or {WRITTEN!r}, got {init_scope!r}")
        if init is not None and init is not IDENTITY and (isinstance(init, bool) or not isinstance(init, (int, float))):
            raise TypeError(f"iteration {name}: init must be a number or None, got {init!r}")
        if accum_dtype is not None and accum_dtype not in ACCUM_DTYPES:
            raise TypeError(f"iteration {name}: accum_dtype must be one of {ACCUM_DTYPES}, got {accum_dtype!r}")
        self.name = name
        self.atomic = atomic
        self.init_scope = init_scope
        self.accum_dtype = accum_dtype
        self.groups = tuple(groups)
        self.kinds = kinds
        self.iter_vars = tuple(iter_vars)
        self.stores = tuple(stores)
        self.init = init
        self.buffers = tuple(buffers)  # every buffer the body touches, first use first
        self._validate()

    @property
    def axes(self) -> list[Axis]:
        """The iterated axes in loop order, fused groups expanded."""
        out = []
        for group in self.groups:
            out.extend(group.axes if isinstance(group, FusedAxis) else (group,))
        return out

    def init_of(self, store: SparseStore):
        """The value ``store``'s target starts from: None (keep), or a number."""
        if self.init is None or not store.accumulate:
            return None
        if self.init is IDENTITY:
            return reducer_identity(store.reducer, store.buffer.dtype)
        return self.init

    def kind_of(self, axis: Axis) -> str:
        return self.kinds[self.axes.index(axis)]

    def var_of(self, axis: Axis) -> tirx.Var:
        return self.iter_vars[self.axes.index(axis)]

    def replace(self, *, groups=None, kinds=None, name=None) -> SparseIteration:
        """A copy with a new loop structure over the same axes, iterators and body."""
        groups = self.groups if groups is None else groups
        new_axes = [a for g in groups for a in (g.axes if isinstance(g, FusedAxis) else (g,))]
        kinds = kinds if kinds is not None else "".join(self.kind_of(a) for a in new_axes)
        iter_vars = [self.var_of(a) for a in new_axes]
        return SparseIteration(name or self.name, groups, kinds, iter_vars, self.stores, self.init, self.buffers,
                               self.atomic, self.init_scope, self.accum_dtype)

    def _validate(self) -> None:
        axes = self.axes
        if not self.name.isidentifier():
            raise ValueError(f"iteration name must be an identifier, got {self.name!r}")
        if len(self.kinds) != len(axes) or any(k not in KINDS for k in self.kinds):
            raise ValueError(
                f"iteration {self.name}: kinds {self.kinds!r} must give one of 'S'/'R' for each of "
                f"the {len(axes)} axes {[a.name for a in axes]}"
            )
        if len(set(map(id, axes))) != len(axes):
            raise ValueError(f"iteration {self.name}: an axis is iterated twice")
        for position, axis in enumerate(axes):
            if axis.parent is None:
                continue
            if axis.parent not in axes:
                raise ValueError(
                    f"iteration {self.name}: axis {axis.name} is iterated without its parent {axis.parent.name}"
                )
            if axes.index(axis.parent) > position:
                raise ValueError(
                    f"iteration {self.name}: axis {axis.name} comes before its parent {axis.parent.name}"
                )
        for group in self.groups:
            if isinstance(group, FusedAxis):
                group_kinds = {self.kind_of(a) for a in group.axes}
                if len(group_kinds) != 1:
                    raise ValueError(f"iteration {self.name}: fused axes {group} mix 'S' and 'R' kinds")
        if not self.stores:
            raise ValueError(f"iteration {self.name}: the body stores nothing")
        has_reduction = "R" in self.kinds
        for store in self.stores:
            if has_reduction and not store.accumulate:
                raise ValueError(
                    f"iteration {self.name}: {store.buffer.name} is assigned with '=' but the iteration "
                    f"reduces over an 'R' axis; use '+=', or {store.buffer.name}[...] = "
                    f"ir.max({store.buffer.name}[...], x) (or ir.min) for a max (min) reduction"
                )

    def __repr__(self) -> str:
        return f"SparseIteration({self.name}, {list(self.groups)}, {self.kinds!r})"


class _StoreRecorder:
    """Collects the stores a body function makes."""

    def __init__(self, name: str):
        self.name = name
        self.stores: list[SparseStore] = []
        self.buffers: list[SparseBuffer] = []  # every buffer touched, first use first

        self.accesses: list[tuple[SparseBuffer, tuple]] = []  # every load and store with its indices

    def record_load(self, buffer: SparseBuffer, indices=None) -> None:
        if buffer not in self.buffers:
            self.buffers.append(buffer)
        if indices is not None:
            self.accesses.append((buffer, tuple(indices)))

    def record_store(self, buffer: SparseBuffer, indices, value) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = tirx.const(value, buffer.dtype)
        if not isinstance(value, tirx.Expr):
            raise TypeError(f"{self.name}: cannot store {type(value).__name__} into {buffer.name}")
        reducer = None
        if isinstance(value, tirx.Add) and _is_load_of(value.a, buffer, indices):
            value, reducer = value.b, "sum"
        elif isinstance(value, (tirx.Max, tirx.Min)):
            kind = "max" if isinstance(value, tirx.Max) else "min"
            if _is_load_of(value.a, buffer, indices):
                value, reducer = value.b, kind
            elif _is_load_of(value.b, buffer, indices):
                value, reducer = value.a, kind
        if expr_dtype(value) != buffer.dtype:
            raise TypeError(
                f"{self.name}: storing a {expr_dtype(value)} value into {buffer.name} ({buffer.dtype}); "
                f"cast explicitly"
            )
        self.record_load(buffer, indices)
        self.stores.append(SparseStore(buffer, tuple(indices), value, reducer))


def _is_load_of(expr, buffer: SparseBuffer, indices) -> bool:
    return (
        isinstance(expr, TensorLoad)
        and expr.source.same_as(buffer.coordinate_view)
        and tvm_ffi.structural_equal(list(expr.indices), list(indices))
    )


def sparse_iteration(axes, kinds: str, *, name: str | None = None, init=IDENTITY, atomic: bool = False,
                     init_scope: str = OUTPUT, accum_dtype: str | None = None):
    """Decorator: trace a body function into a :class:`SparseIteration`.

    Parameters
    ----------
    axes : list of Axis or FusedAxis
        The loops, outermost first; a child axis after its parent.
    kinds : str
        ``"S"`` (spatial) or ``"R"`` (reduction) per axis (fused axes expanded).
    name : str, optional
        The iteration's name (default: the function's).
    init : number or None
        What reduction targets start from (default: the reduction's identity, 0 / -inf /
        +inf); None keeps what they hold.
    atomic : bool
        Parallel instances may update the same element (see the module docstring).
    init_scope : str
        ``"output"`` (the whole output starts from ``init``) or ``"written"`` (only the
        elements the spatial loops address).
    accum_dtype : str, optional
        Reduce in this wider float dtype (e.g. ``"float32"`` for float16 or bfloat16 outputs);
        ``transform.widen_accumulation`` (run by the lowering) gives each narrower reduction
        target an accumulator and casts the result back once.

    Returns
    -------
    callable
        A decorator: the body function receives one coordinate iterator per axis, named after
        its parameters (or after the axes, for ``def body(*iters)``), and stores into sparse
        buffers; the decorated name is the :class:`SparseIteration`.
    """
    groups = list(axes)
    for group in groups:
        if not isinstance(group, (Axis, FusedAxis)):
            raise TypeError(f"sparse_iteration takes axes, got {type(group).__name__}")
    flat = [a for g in groups for a in (g.axes if isinstance(g, FusedAxis) else (g,))]

    def decorate(body) -> SparseIteration:
        params = list(inspect.signature(body).parameters.values())
        if len(params) == 1 and params[0].kind is inspect.Parameter.VAR_POSITIONAL:
            names = [axis.name.lower() for axis in flat]  # def body(*iters): ... for any number of axes
        else:
            names = [param.name for param in params]
        if len(names) != len(flat):
            raise TypeError(f"{body.__name__} takes {len(names)} iterators but iterates {len(flat)} axes")
        iter_vars = [tirx.Var(name, axis.idtype) for name, axis in zip(names, flat)]
        recorder = _StoreRecorder(name or body.__name__)
        with recording(recorder):
            try:
                returned = body(*iter_vars)
            except ValueError as error:
                if "Cannot use and / or / not operator to Expr" not in str(error):
                    raise
                raise TypeError(
                    f"{body.__name__}: the body used Python's max/min, if/else, a comparison chain or and/or/not "
                    "on a traced expression, which needs a Python bool; iterators and buffer values are "
                    "symbolic: write ir.max(a, b) / ir.min(a, b) for max/min (a max reduction is "
                    "C[i] = ir.max(C[i], x)), ir.where(condition, a, b) for a choice, and combine conditions "
                    "with tvm.tirx.all / tvm.tirx.any") from error
        if returned is not None:
            raise TypeError(f"{body.__name__} must store into buffers, not return a value")
        _check_axis_order(body.__name__, recorder.accesses, dict(zip(map(id, iter_vars), flat)))
        return SparseIteration(recorder.name, groups, kinds, iter_vars, recorder.stores, init, recorder.buffers,
                               atomic, init_scope, accum_dtype)

    return decorate


def _check_axis_order(body: str, accesses, axis_of_var: dict) -> None:
    """A buffer over a sparse axis is indexed in its own axes' order: ``A[j, i]`` on an ``(I, J)`` buffer,
    with ``i`` and ``j`` the iterators of ``I`` and ``J``, would compile to a coordinate lookup that reads
    the missing entries as 0, a transpose nobody asked for, so it is refused when the body is traced.
    (Reading a sparse buffer at another axis' coordinates on purpose, ``B[j, k]`` on a dense ``(J_dense,
    K)``, stays allowed: that buffer's axes are other axes.)"""
    for buffer, indices in accesses:
        if not any(axis.parent is not None for axis in buffer.axes):
            continue  # dense buffers are indexed by coordinates in any order
        for position, index in enumerate(indices):
            axis = axis_of_var.get(id(index)) if isinstance(index, tirx.Var) else None
            if axis is None or axis is buffer.axes[position] or axis not in buffer.axes:
                continue
            own = ", ".join(a.name.lower() for a in buffer.axes)
            raise ValueError(
                f"{body}: {buffer.name} has axes ({', '.join(a.name for a in buffer.axes)}) but is indexed with "
                f"{axis.name}'s iterator at position {position} (where {buffer.axes[position].name} belongs): "
                f"index it in its own order, {buffer.name}[{own}]; a sparse buffer read at swapped "
                "coordinates would return 0 for every entry it does not store")
