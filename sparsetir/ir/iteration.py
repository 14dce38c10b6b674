"""Sparse iterations: a loop nest over axes, with "S"/"R" kinds, an init and a body (Stage I).

Write the body as an ordinary Python function over coordinate iterators::

    @sparse_iteration([I, J, K], "SRS")
    def spmm(i, j, k):
        C[i, k] += A[i, j] * B[j, k]

``+=`` makes an accumulating store (a reduction over the "R" axes); the output
is first set to ``init`` (0 by default; ``init=None`` accumulates into what the
output already holds; ``init_scope="written"``: only the elements the spatial loops address
start from ``init``, for sub-formats that own their rows). Plain ``=`` stores need no "R"
axis. ``atomic=True`` makes "+="
stores atomic on CUDA, for iterations whose parallel instances may update the same element
(sub-formats fused into one launch, split rows).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import tvm_ffi
from tvm import tirx
from tvm.ir.expr import TensorLoad

from .axis import Axis, FusedAxis, expr_dtype
from .buffer import SparseBuffer, recording

KINDS = ("S", "R")
# init scopes: the whole output starts from init, or only the elements the spatial loops address
OUTPUT, WRITTEN = "output", "written"


@dataclass(frozen=True, eq=False)
class SparseStore:
    """``buffer[indices] = value`` or, when ``accumulate``, ``buffer[indices] += value``."""

    buffer: SparseBuffer
    indices: tuple
    value: tirx.Expr
    accumulate: bool


class SparseIteration:
    """One sparse iteration. ``groups`` are Axis or FusedAxis loops, outermost first."""

    def __init__(self, name: str, groups, kinds: str, iter_vars, stores, init, buffers, atomic: bool = False,
                 init_scope: str = OUTPUT):
        if init_scope not in (OUTPUT, WRITTEN):
            raise ValueError(f"init_scope must be {OUTPUT!r} or {WRITTEN!r}, got {init_scope!r}")
        self.name = name
        self.atomic = atomic
        self.init_scope = init_scope
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
                               self.atomic, self.init_scope)

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
                    f"reduces over an 'R' axis; use '+='"
                )

    def __repr__(self) -> str:
        return f"SparseIteration({self.name}, {list(self.groups)}, {self.kinds!r})"


class _StoreRecorder:
    """Collects the stores a body function makes."""

    def __init__(self, name: str):
        self.name = name
        self.stores: list[SparseStore] = []
        self.buffers: list[SparseBuffer] = []  # every buffer touched, first use first

    def record_load(self, buffer: SparseBuffer) -> None:
        if buffer not in self.buffers:
            self.buffers.append(buffer)

    def record_store(self, buffer: SparseBuffer, indices, value) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = tirx.const(value, buffer.dtype)
        if not isinstance(value, tirx.Expr):
            raise TypeError(f"{self.name}: cannot store {type(value).__name__} into {buffer.name}")
        accumulate = False
        if isinstance(value, tirx.Add) and _is_load_of(value.a, buffer, indices):
            value, accumulate = value.b, True
        if expr_dtype(value) != buffer.dtype:
            raise TypeError(
                f"{self.name}: storing a {expr_dtype(value)} value into {buffer.name} ({buffer.dtype}); "
                f"cast explicitly"
            )
        self.record_load(buffer)
        self.stores.append(SparseStore(buffer, tuple(indices), value, accumulate))


def _is_load_of(expr, buffer: SparseBuffer, indices) -> bool:
    return (
        isinstance(expr, TensorLoad)
        and expr.source.same_as(buffer.coordinate_view)
        and tvm_ffi.structural_equal(list(expr.indices), list(indices))
    )


def sparse_iteration(axes, kinds: str, *, name: str | None = None, init=0, atomic: bool = False,
                     init_scope: str = OUTPUT):
    """Decorator: trace a body function into a :class:`SparseIteration`.

    The function receives one coordinate iterator per axis (fused axes expanded), named
    after its parameters (or after the axes, for ``def body(*iters)``). ``init`` is the value outputs start from before "+=" (``None``:
    keep the output's current contents); ``init_scope="written"``: only the elements the
    iteration writes start from ``init``.
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
            returned = body(*iter_vars)
        if returned is not None:
            raise TypeError(f"{body.__name__} must store into buffers, not return a value")
        return SparseIteration(recorder.name, groups, kinds, iter_vars, recorder.stores, init, recorder.buffers,
                               atomic, init_scope)

    return decorate
