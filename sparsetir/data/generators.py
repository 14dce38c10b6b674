"""Seeded synthetic sparse matrices, for scale curves and tests.

Specs (the strings the workflow and ``sparsetir.bench.quick`` accept as dataset names):

- ``synthetic:<m>x<n>:<density>``: uniform random positions, values in [0, 1).
- ``rmat:<scale>:<edge_factor>``: an R-MAT graph (Chakrabarti et al.) with ``2**scale``
  vertices and ``edge_factor * 2**scale`` sampled edges, quadrant probabilities
  (0.57, 0.19, 0.19, 0.05) as in Graph500, vertex ids shuffled, symmetrised.
- ``powerlaw:<n>:<avg_degree>:<exponent>``: a Chung-Lu graph whose expected degrees follow a
  power law with that exponent (> 2) and mean, symmetrised.

The same spec and seed always give the same matrix.

Sizes are limited (:data:`MAX_GENERATED_ENTRIES`, :data:`MAX_GENERATED_ROWS`): a spec whose
expected stored entries (before symmetrising: ``m n density``, ``edge_factor * 2**scale``,
``n * avg_degree / 2``) or rows pass them is refused by :func:`parse_spec`, so the workflow's
config check stops it before any job, and :func:`generate` never starts allocating for it.
Generating ``E`` entries peaks at about 60 bytes each, so the limit keeps a generator under
about 12 GB, within a 24 GB machine.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_coordinates
from .symmetrize import symmetrize

__all__ = ["GENERATOR_PREFIXES", "MAX_GENERATED_ENTRIES", "MAX_GENERATED_ROWS", "generate", "is_generated",
           "parse_spec", "power_law", "rmat", "uniform"]

GENERATOR_PREFIXES = ("synthetic:", "rmat:", "powerlaw:")
#: The most entries a generator spec may ask for (expected, before symmetrising): 2e8.
MAX_GENERATED_ENTRIES = 200_000_000
#: The most rows (and columns) a generated matrix may have: 2**27 (R-MAT scale 27).
MAX_GENERATED_ROWS = 1 << 27
RMAT_PROBABILITIES = (0.57, 0.19, 0.19)


def uniform(m: int, n: int, density: float, *, seed: int = 0) -> sp.csr_matrix:
    """``m x n`` with ``round(m n density)`` uniformly placed non-zeros (duplicates summed)."""
    check_arguments("synthetic", (m, n, density), what=f"uniform({m}, {n}, {density})")
    rng = np.random.default_rng(seed)
    nnz = round(m * n * density)
    rows, cols = rng.integers(0, m, nnz), rng.integers(0, n, nnz)
    return csr_from_coordinates(rows, cols, (m, n), rng.random(nnz, dtype=np.float32))


def rmat(scale: int, edge_factor: int, *, probabilities=RMAT_PROBABILITIES, seed: int = 0) -> sp.csr_matrix:
    """A symmetrised R-MAT graph with ``2**scale`` vertices (pattern of ones)."""
    a, b, c = probabilities
    check_arguments("rmat", (scale, edge_factor), what=f"rmat({scale}, {edge_factor})")
    scale, edge_factor = int(scale), int(edge_factor)
    if min(a, b, c) < 0 or a + b + c > 1:
        raise ValueError(f"quadrant probabilities must be >= 0 and sum to at most 1, got {probabilities}")
    rng = np.random.default_rng(seed)
    n, m = 1 << scale, edge_factor << scale
    rows, cols = np.zeros(m, np.int64), np.zeros(m, np.int64)
    for bit in range(scale):
        draw = rng.random(m)
        row_bit = draw >= a + b
        col_bit = ((draw >= a) & (draw < a + b)) | (draw >= a + b + c)
        rows |= row_bit.astype(np.int64) << bit
        cols |= col_bit.astype(np.int64) << bit
    shuffle = rng.permutation(n)
    return symmetrize(csr_from_coordinates(shuffle[rows], shuffle[cols], (n, n)))


def power_law(n: int, avg_degree: float, exponent: float, *, seed: int = 0) -> sp.csr_matrix:
    """A symmetrised Chung-Lu graph with power-law expected degrees (pattern of ones)."""
    check_arguments("powerlaw", (n, avg_degree, exponent), what=f"power_law({n}, {avg_degree}, {exponent})")
    rng = np.random.default_rng(seed)
    weights = np.arange(1, n + 1, dtype=np.float64) ** (-1.0 / (exponent - 1.0))
    weights /= weights.sum()
    edges = max(1, round(n * avg_degree / 2))
    rows = rng.choice(n, size=edges, p=weights)
    cols = rng.choice(n, size=edges, p=weights)
    shuffle = rng.permutation(n)
    return symmetrize(csr_from_coordinates(shuffle[rows], shuffle[cols], (n, n)))


def is_generated(spec: str) -> bool:
    """Whether ``spec`` names a generated matrix rather than a registry dataset."""
    return isinstance(spec, str) and spec.startswith(GENERATOR_PREFIXES)


_BAD_SPEC = ("expected synthetic:<m>x<n>:<density>, rmat:<scale>:<edge_factor> "
             "or powerlaw:<n>:<avg_degree>:<exponent>")
_LIMITS = {
    "synthetic": lambda m, n, density: _whole(m, n) and m > 0 and n > 0 and 0 <= density <= 1,
    "rmat": lambda scale, edge_factor: _whole(scale, edge_factor) and 1 <= scale <= 30 and edge_factor >= 1,
    "powerlaw": lambda n, degree, exponent: _whole(n) and n >= 2 and degree > 0 and exponent > 2,
}

def _whole(*values) -> bool:
    return all(isinstance(v, (int, np.integer)) or float(v).is_integer() for v in values)


def _finite(value) -> bool:
    return isinstance(value, (int, np.integer)) or math.isfinite(value)


#: (rows, columns, expected stored entries before symmetrising) of each generator's arguments.
_SIZES = {
    "synthetic": lambda m, n, density: (m, n, m * n * density),
    "rmat": lambda scale, edge_factor: (1 << int(scale), 1 << int(scale), int(edge_factor) << int(scale)),
    "powerlaw": lambda n, degree, exponent: (n, n, n * degree / 2),
}


def parse_spec(spec: str) -> tuple[str, tuple]:
    """``(kind, arguments)`` of a generator spec, checked without generating; ``ValueError`` if malformed."""
    kind, _, rest = spec.partition(":")
    fields = rest.split(":")
    try:
        if kind == "synthetic" and len(fields) == 2:
            m, n = (int(side) for side in fields[0].lower().split("x"))
            args = (m, n, float(fields[1]))
        elif kind == "rmat" and len(fields) == 2:
            args = (int(fields[0]), int(fields[1]))
        elif kind == "powerlaw" and len(fields) == 3:
            args = (int(fields[0]), float(fields[1]), float(fields[2]))
        else:
            raise ValueError
    except ValueError:
        raise ValueError(f"bad generator spec {spec!r}; {_BAD_SPEC}") from None
    check_arguments(kind, args, what=f"generator spec {spec!r}")
    return kind, args


def check_arguments(kind: str, args: tuple, *, what: str) -> None:
    """The generator's arguments are in range and its result fits the size limits: every float that
    becomes a count (``round(m n density)``, ``round(n avg_degree / 2)``) is finite and representable,
    so a generator never meets an ``OverflowError`` or an allocation it cannot make."""
    if not all(isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool) for a in args):
        raise TypeError(f"{what}: arguments must be numbers, got {args!r}")
    if not all(_finite(a) for a in args) or not _LIMITS[kind](*args):
        raise ValueError(f"{what}: arguments out of range ({_BAD_SPEC}; rmat scale 1..30, "
                         "powerlaw exponent > 2, density in [0, 1], every number finite)")
    rows, cols, entries = _SIZES[kind](*args)
    if max(rows, cols) > MAX_GENERATED_ROWS or entries > MAX_GENERATED_ENTRIES:
        raise ValueError(f"{what} is too large: {rows:,} x {cols:,} with about {entries:,.0f} "
                         f"entries; the limits are {MAX_GENERATED_ROWS:,} rows or columns and "
                         f"{MAX_GENERATED_ENTRIES:,} entries (sparsetir.data.generators)")


def generate(spec: str, seed: int = 0) -> sp.csr_matrix:
    """The matrix a generator spec describes (see the module docstring); ``ValueError`` if malformed."""
    kind, args = parse_spec(spec)
    make = {"synthetic": uniform, "rmat": rmat, "powerlaw": power_law}[kind]
    return make(*args, seed=seed)
