"""The op registry: one declaration per op, read by the tuner, the benchmark, the GPU bundle and the workflow.

An op module (``spmm.py``, ``sddmm.py``, ...) defines its Stage I builder, compile function and
user-level call, and registers one :class:`OpSpec` that also names the knobs the tuner searches
and points at the op's float64 reference (``sparsetir.reference``: the case, the reference, the
flops and bytes models and the baselines that compute the same thing, kept importable without
the compiler for the GPU bundle's runner). Everything above the ops (``sparsetir.tune``,
``sparsetir.bench``, ``workflows/``) looks the op up here by name; this package imports every
module in its folder, so a new op is a new module here plus its reference module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..reference import OpReference
from ..registry import Registry
from ..schedule.knobs import knob


def check_feat(feat, name: str = "feat") -> int:
    """A positive int feature size (a ``TypeError`` or ``ValueError`` otherwise)."""
    if isinstance(feat, bool) or not isinstance(feat, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(feat).__name__}")
    if feat < 1:
        raise ValueError(f"{name} must be >= 1, got {feat}")
    return int(feat)


@dataclass(frozen=True)
class OpSpec:
    """Everything the layers above need to know of one op.

    Parameters
    ----------
    name : str
        The op's name (``"spmm"``): the key of tuning records, benchmark records and configs.
    function : callable
        The Stage I builder: ``function(fmt, feat, dtype, idtype, device, **op_knobs) -> SparseFunction``.
    compile : callable
        ``compile(A, feat, *, format, target, dtype, **knobs) -> Kernel``, bound to A's structure.
    call : callable
        The user-level op (``sparsetir.ops.<name>``).
    reference : OpReference
        What the op computes (``sparsetir.reference``): case, float64 reference, flops, the
        baselines that compute the same thing.
    knobs : mapping
        ``device -> {knob name: this op's default}``: the knobs the tuner searches for this op
        (declared in ``sparsetir.schedule.knobs``); a default given here is tried first and
        used when the caller gives none.
    default_format : str
        The format a plain call uses, first in the tuner's search space.
    input : str
        The kind of sparse input the op takes (``Format.input``): ``"csr"`` or ``"relational"``.
    feature_sizes : callable
        ``feature_sizes(*inputs) -> tuple``: the sizes ``compile`` takes after the sparse input,
        read off the dense inputs (default: the first input's columns).
    feature_args : callable
        ``feature_args(feat) -> tuple``: those sizes from the ``feat`` a tuning request or a
        config gives (default: one positive int), validated.
    front_ends : dict
        ``kind -> call``: the op for other kinds of operands, registered by the module that
        provides it (:meth:`register_front_end`): ``ops/torch_ops.py`` registers ``"torch"``
        (``torch.ops.sparsetir.<op>``, differentiable), which the user-level call hands torch
        tensors to. The op's module never imports that front end, so neither imports the other.
    """

    name: str
    function: Callable
    compile: Callable
    call: Callable
    reference: OpReference
    knobs: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    default_format: str = "csr"
    input: str = "csr"
    feature_sizes: Callable = lambda first, *rest: (int(first.shape[1]),)
    feature_args: Callable = lambda feat: (check_feat(feat),)
    front_ends: dict = field(default_factory=dict, compare=False, repr=False)

    def register_front_end(self, kind: str, call: Callable) -> Callable:
        """Make ``call`` this op's entry for ``kind`` operands (once per kind; the same call again is harmless)."""
        if self.front_ends.get(kind, call) is not call:
            raise ValueError(f"op {self.name!r} already has a {kind!r} front end")
        self.front_ends[kind] = call
        return call

    def front_end(self, kind: str) -> Callable:
        """The call registered for ``kind`` operands; ``RuntimeError`` when no module registered one."""
        if kind not in self.front_ends:
            raise RuntimeError(f"op {self.name!r} has no {kind!r} front end (import sparsetir.ops: ops/torch_ops.py "
                               "registers the torch one)")
        return self.front_ends[kind]

    def accepts(self, fmt) -> bool:
        """Whether format ``fmt`` (a class or an instance) stores this op's input and supports it."""
        return fmt.input == self.input and fmt.supports(self.name)

    def tuned_knobs(self, device: str) -> list[str]:
        """The knobs the tuner searches for this op on ``device``."""
        return list(self.knobs.get(device, {}))

    def default_knobs(self, device: str) -> dict:
        """The defaults this op sets itself (where they differ from the knob's own)."""
        return {name: value for name, value in self.knobs.get(device, {}).items()
                if value is not ... and value != knob(device, name).default}

    def knob_values(self, device: str) -> dict[str, tuple]:
        """``knob -> search values`` on ``device``, this op's default first."""
        values = {}
        for name, default in self.knobs.get(device, {}).items():
            declared = knob(device, name)
            first = declared.default if default is ... else default
            values[name] = (first, *(v for v in declared.values if v != first))
        return values

    def benchmark_kernel(self, A, *inputs, format, **knobs) -> Callable[[], object]:
        """``run()`` computing this op with a kernel compiled for A, into a preallocated output.

        ``run.timings`` holds the kernel's conversion and compile seconds.
        """
        first = inputs[0]
        kernel = self.compile(A, *self.feature_sizes(*inputs), format=format, target="llvm", dtype=first.dtype.name,
                              **knobs)
        out = np.empty(kernel.output_shape(), dtype=first.dtype)

        def run():
            kernel(*inputs, out=out)
            return out

        run.timings = dict(kernel.timings)
        return run


_OPS: Registry[OpSpec] = Registry("op")


def register_op(spec: OpSpec) -> OpSpec:
    """Add ``spec`` to the registry (a name is registered once)."""
    if not isinstance(spec, OpSpec):
        raise TypeError(f"register_op takes an OpSpec, got {type(spec).__name__}")
    if spec.reference.name != spec.name:
        raise ValueError(f"op {spec.name!r} points at the reference of {spec.reference.name!r}")
    for device, knobs in spec.knobs.items():
        for name in knobs:
            knob(device, name)  # a TypeError for an undeclared knob, at registration
    return _OPS.register(spec.name, spec)


def get_op(name: str) -> OpSpec:
    """The registered op ``name``; ``ValueError`` listing the known ones otherwise."""
    return _OPS.get(name)


def op_names() -> list[str]:
    """The registered ops, in registration order."""
    return _OPS.names()
