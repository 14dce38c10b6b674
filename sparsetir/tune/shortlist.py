"""A short list of candidates worth measuring, chosen without measuring (for a GPU bundle).

A bundle carries few candidates per (matrix, feature size), so they are chosen here by a
static cost model rather than by timing:

- formats: CSR, then hyb settings ranked by the rows of B they read plus the rows of C they
  write (each a ``feat``-long row access). A (row, column part) segment of degree ``d`` reads
  the smallest bucket width ``>= d`` slots and writes once; past the largest width ``w`` it
  becomes ``ceil(d / w)`` ELL rows of ``w`` slots, each written with an atomic. With more than
  one column part every write is atomic; an atomic write costs ``ATOMIC_WRITE`` plain ones.
  The ranking prefers one setting per column-part count first, so the list is diverse.
  ``extra_formats`` (for example the paper's per-dataset setting) come right after CSR.
- knobs: a few CUDA (or CPU) knob settings, the template default first.

Candidates are ordered knob setting by knob setting, so a ``limit`` keeps every format
with the default knobs before any second knob setting.

    >>> shortlist(matrix, "cuda", limit=6)   # matrix: formats.read_sparse_input(A, canonical=True)
    [{'format': 'csr', 'rows_per_block': 4, 'lanes': 32, 'specialize': False}, ...]
"""

from __future__ import annotations

import numpy as np

from .space import config_key, search_space

DEFAULT_HYB_SETTINGS = 2  # hyb formats on the list (besides extra_formats)
ATOMIC_WRITE = 2.0  # cost of an atomic row write, in plain row accesses
# knob settings on the list, in order; the first is each template's default
KNOB_SETTINGS = {
    "cuda": ({"rows_per_block": 4, "lanes": 32}, {"rows_per_block": 8, "lanes": 32},
             {"rows_per_block": 2, "lanes": 16}),
    "cpu": ({}, {"vector_width": 8}, {"unroll": 4}),
}


def hyb_cost(matrix, fmt: str) -> float:
    """Row accesses of hyb ``fmt`` on ``matrix`` (a canonical CSRMatrix): padded slots read plus
    ELL rows written, atomic writes weighted by ``ATOMIC_WRITE``."""
    from ..formats import parse_format
    from ..formats.hyb import RowPartSegments

    hyb = parse_format(fmt)
    if hyb.name != "hyb" or hyb.buckets is None:
        raise ValueError(f"hyb_cost needs a hyb format with explicit buckets, got {fmt!r}")
    widths = np.asarray(hyb.buckets, dtype=np.int64)
    degrees = RowPartSegments.of(matrix, hyb.col_parts).lengths
    largest = widths[-1]
    fits = degrees <= largest
    pieces = -(-degrees // largest)
    slots = np.where(fits, widths[np.minimum(np.searchsorted(widths, degrees), len(widths) - 1)], pieces * largest)
    atomic_pieces = pieces.sum() if hyb.col_parts > 1 else pieces[~fits].sum()
    writes = pieces.sum() - atomic_pieces + ATOMIC_WRITE * atomic_pieces
    return float(slots.sum() + writes)


def ranked_hyb_formats(matrix, formats, count: int) -> list[str]:
    """Up to ``count`` hyb format strings from ``formats``, cheapest first, one per column-part count first."""
    costs = {fmt: hyb_cost(matrix, fmt) for fmt in formats if fmt.startswith("hyb:")}
    ranked = sorted(costs, key=lambda fmt: (costs[fmt], fmt))
    chosen, parts_seen = [], set()
    for fmt in ranked:  # the best of each column-part count, in cost order
        parts = fmt.split(":")[1]
        if parts not in parts_seen:
            parts_seen.add(parts)
            chosen.append(fmt)
    chosen = chosen[:count]
    chosen += [fmt for fmt in ranked if fmt not in chosen][:count - len(chosen)]
    return sorted(chosen, key=lambda fmt: (costs[fmt], fmt))


def shortlist(matrix, device: str, *, limit: int, op: str = "spmm", hyb_settings: int = DEFAULT_HYB_SETTINGS,
              extra_formats=(), knob_settings=None) -> list[dict]:
    """At most ``limit`` candidate configs for ``op`` on ``matrix``: CSR and hyb formats x knob settings.

    Every config is a complete point of ``search_space(op, matrix, device)`` (all its knobs set),
    so ``compile_spmm(A, feat, **config)`` accepts it.
    """
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"limit must be a positive int (candidates per dataset and feature size), got {limit!r}")
    if not isinstance(hyb_settings, int) or hyb_settings < 0:
        raise ValueError(f"hyb_settings must be a non-negative int, got {hyb_settings!r}")
    space = search_space(op, matrix, device)
    formats = ["csr"] + [fmt for fmt in extra_formats if fmt != "csr"]
    formats += [fmt for fmt in ranked_hyb_formats(matrix, space.formats, hyb_settings) if fmt not in formats]
    settings = KNOB_SETTINGS[device] if knob_settings is None else knob_settings
    if not settings:
        raise ValueError("knob_settings is empty: give at least one knob setting ({} is the default)")
    default = space.default()
    configs, seen = [], set()
    for setting in settings:
        unknown = set(setting) - set(space.knobs)
        if unknown:
            raise ValueError(f"unknown {device} knob(s) {sorted(unknown)} for {op}; known: {sorted(space.knobs)}")
        for fmt in formats:
            config = {**default, "format": fmt, **setting}
            if config_key(config) not in seen and space.valid(config):
                seen.add(config_key(config))
                configs.append(config)
    return configs[:limit]
