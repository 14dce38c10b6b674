"""Search spaces: format parameters x knobs, per op and device, read from the registries.

A candidate is a configuration dict that the op's compile function accepts as keyword
arguments: ``{"format": "hyb:1:1,2,4,8", "vector_width": 8, ...}``. The formats come from
the format registry (each format offers its candidates for the matrix, ``tuning_candidates``),
the knobs and their search values from the op's declaration (``OpSpec.knob_values``), and the
validity of a configuration from each knob's ``requires``.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import numpy as np

from ..formats import parse_format, registered_formats
from ..ops import get_op
from ..schedule.knobs import knob


def format_choices(matrix, op: str, device: str = "cpu") -> list[str]:
    """Format strings worth trying for ``matrix`` (a validated CSR input), the op's default first.

    A matrix without non-zeros gets only the default: every format computes the same nothing.
    """
    spec = get_op(op)
    choices = [spec.default_format]
    if not np.any(np.diff(np.asarray(matrix.indptr, dtype=np.int64))):
        return choices
    for cls in registered_formats():
        if spec.accepts(cls) and device in cls.tuning_devices:
            choices += [choice for choice in cls.tuning_candidates(matrix, op, device) if choice not in choices]
    return choices


@dataclass
class SearchSpace:
    """The formats and knob values of one tuning problem; candidates are dicts."""

    op: str
    device: str
    formats: list[str]
    knobs: dict[str, tuple] = field(default_factory=dict)
    _parsed: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # format string -> Format

    def default(self) -> dict:
        return {"format": self.formats[0], **{name: values[0] for name, values in self.knobs.items()}}

    def dimensions(self) -> dict[str, tuple]:
        return {"format": tuple(self.formats), **self.knobs}

    def size(self) -> int:
        return sum(1 for _ in self.candidates())

    def valid(self, config: dict) -> bool:
        """Whether ``config`` can compile: every knob allows its value in the config's format."""
        fmt = self._parsed.get(config["format"])
        if fmt is None:
            fmt = self._parsed[config["format"]] = parse_format(config["format"])
        return all(knob(self.device, name).allows(value, fmt, self.device)
                   for name, value in config.items() if name != "format")

    def candidates(self):
        """Every valid candidate, the default first."""
        names = list(self.dimensions())
        for values in itertools.product(*self.dimensions().values()):
            config = dict(zip(names, values))
            if self.valid(config):
                yield config

    def random(self, rng: random.Random) -> dict:
        for _ in range(100):
            config = {name: rng.choice(values) for name, values in self.dimensions().items()}
            if self.valid(config):
                return config
        return self.default()

    def neighbours(self, config: dict) -> list[dict]:
        """Valid candidates that differ from ``config`` in one dimension."""
        result = []
        for name, values in self.dimensions().items():
            for value in values:
                if value != config.get(name):
                    changed = {**config, name: value}
                    if self.valid(changed):
                        result.append(changed)
        return result


def search_space(op: str, matrix, device: str) -> SearchSpace:
    """The space of a registered ``op`` on ``matrix`` for ``device`` ("cpu" or "cuda")."""
    try:
        values = get_op(op).knob_values(device)
    except ValueError as error:
        raise ValueError(f"no search space for op {op!r} on {device!r}: {error}") from None
    if not values:
        raise ValueError(f"no search space for op {op!r} on {device!r}: the op tunes no knobs there")
    return SearchSpace(op, device, format_choices(matrix, op, device), values)


def config_key(config: dict) -> str:
    """A stable text key for a candidate (dict order and None handled)."""
    return ",".join(f"{name}={config[name]}" for name in sorted(config))
