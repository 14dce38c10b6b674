"""The knob registry: one declaration per tunable knob, read by the schedule templates, the ops and the tuner.

A knob has a name, the device it applies to, a default, the values the tuner searches
(the default first), a check of a given value, and whom it is for: the schedule template
(``scope="schedule"``) or the op composing the kernel (``scope="op"``: ``horizontal_fuse``,
``specialize``, ``sparse_fuse``). A knob may also say which formats it needs
(``requires(value, fmt, device) -> bool``), so the tuner skips configurations that cannot build.

The templates (``cpu.py``, ``cuda.py``) declare their knobs with :func:`register_knob` and
read their settings through :func:`knob_settings`, so the default lives in one place; an op
declares which knobs it tunes (``sparsetir.ops.registry.OpSpec.knobs``) and may put another
default first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Knob:
    """One tunable setting.

    Parameters
    ----------
    name : str
        The keyword the ops and ``compile_*`` functions accept.
    devices : tuple of str
        The devices whose kernels it applies to.
    default : object
        The value when none is given.
    values : tuple
        The values the tuner searches, the default first.
    check : callable
        ``check(value) -> value``; raises ``ValueError`` naming the knob for a bad value.
    doc : str
        One line: what it does.
    scope : str
        ``"schedule"`` (passed to the template) or ``"op"`` (consumed by the op).
    requires : callable, optional
        ``requires(value, fmt, device) -> bool``: whether the value can build in format ``fmt``.
    requirement : str
        What ``requires`` asks for, in words (the error message when it is not met).
    """

    name: str
    devices: tuple
    default: object
    values: tuple
    check: Callable[[object], object]
    doc: str
    scope: str = "schedule"
    requires: Callable[[object, object, str], bool] | None = None
    requirement: str = ""

    def __post_init__(self):
        if not self.values or self.values[0] != self.default:
            raise ValueError(f"knob {self.name}: the search values must start with the default {self.default!r}")
        if self.scope not in ("schedule", "op"):
            raise ValueError(f"knob {self.name}: scope must be 'schedule' or 'op', got {self.scope!r}")
        unknown = set(self.devices) - set(DEVICES)
        if unknown:
            raise ValueError(f"knob {self.name}: unknown device(s) {sorted(unknown)}")
        for value in self.values:
            self.check(value)

    def allows(self, value, fmt, device: str) -> bool:
        """Whether ``value`` can build in format ``fmt`` on ``device``."""
        return self.requires is None or self.requires(value, fmt, device)


_KNOBS: dict[tuple[str, str], Knob] = {}


def register_knob(knob: Knob) -> Knob:
    """Add ``knob`` for each of its devices; a name is declared once per device."""
    for device in knob.devices:
        existing = _KNOBS.get((device, knob.name))
        if existing is not None and existing != knob:
            raise ValueError(f"knob {knob.name!r} is already declared for {device}")
        _KNOBS[(device, knob.name)] = knob
    return knob


def knob(device: str, name: str) -> Knob:
    """The knob ``name`` of ``device``; ``TypeError`` naming the valid ones otherwise."""
    if (device, name) not in _KNOBS:
        raise TypeError(f"unknown {device} knob {name!r}; valid: {sorted(knob_names(device))}")
    return _KNOBS[(device, name)]


def knob_names(device: str, scope: str | None = None) -> list[str]:
    """The knobs declared for ``device`` (of one ``scope`` when given), in declaration order."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    return [k.name for (d, _), k in _KNOBS.items() if d == device and (scope is None or k.scope == scope)]


def knob_settings(device: str, given: dict, scope: str = "schedule") -> dict:
    """Every knob of ``device`` and ``scope`` with its value: ``given`` (checked) or the default.

    A name in ``given`` that is not such a knob raises ``TypeError``.
    """
    names = knob_names(device, scope)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"unknown {device} {'schedule ' if scope == 'schedule' else ''}knob(s) {unknown}; "
                        f"valid: {names}")
    return {name: knob(device, name).check(given[name]) if name in given else knob(device, name).default
            for name in names}


def split_knobs(device: str, knobs: dict) -> tuple[dict, dict]:
    """``knobs`` split into (the op's, the schedule template's), by each knob's scope.

    Names that are not declared for ``device`` go with the schedule's, whose template refuses them.
    """
    op_knobs = {name: value for name, value in knobs.items()
                if (device, name) in _KNOBS and _KNOBS[(device, name)].scope == "op"}
    return op_knobs, {name: value for name, value in knobs.items() if name not in op_knobs}


# ---------------------------------------------------------------- checks shared by the declarations


def optional_positive_int(name: str) -> Callable:
    def check(value):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive int or None, got {value!r}")
        return value
    return check


def int_at_least(name: str, low: int, high: int | None = None) -> Callable:
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            bounds = f"in [{low}, {high}]" if high is not None else f">= {low}"
            raise ValueError(f"{name} must be an int {bounds}, got {value!r}")
        return value
    return check


def boolean(name: str) -> Callable:
    def check(value):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")
        return value
    return check


def optional_boolean(name: str) -> Callable:
    def check(value):
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{name} must be True, False or None, got {value!r}")
        return value
    return check
