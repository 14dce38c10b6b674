"""A short list of candidates worth measuring, chosen without measuring (for a GPU bundle).

A bundle carries few candidates per (matrix, feature size), so they are chosen here by a
static cost model rather than by timing:

- formats: the op's default (CSR), then the formats of the search space that have a static
  cost (``Format.row_access_cost``: rows of B read plus rows of C written, e.g. hyb's), cheapest
  first, taking the cheapest of each ``Format.cost_group`` (hyb: its column-part count) first so
  the list is diverse. ``extra_formats`` (for example the paper's per-dataset setting) come right
  after the default.
- knobs: a few knob settings, the template default first.

Candidates are ordered knob setting by knob setting, so a ``limit`` keeps every format
with the default knobs before any second knob setting.

    >>> shortlist(matrix, "cuda", limit=6)   # matrix: formats.read_sparse_input(A, canonical=True)
    [{'format': 'csr', 'rows_per_block': 4, 'lanes': 32, 'specialize': False}, ...]
"""

from __future__ import annotations

from ..formats import parse_format
from .space import config_key, search_space

DEFAULT_RANKED_FORMATS = 2  # formats ranked by their static cost (besides extra_formats)
# knob settings on the list, in order; the first is each template's default
KNOB_SETTINGS = {
    "cuda": ({"rows_per_block": 4, "lanes": 32}, {"rows_per_block": 8, "lanes": 32},
             {"rows_per_block": 2, "lanes": 16}),
    "cpu": ({}, {"vector_width": 8}, {"unroll": 4}),
}


def ranked_formats(matrix, formats, count: int) -> list[str]:
    """Up to ``count`` of ``formats`` that have a static cost, cheapest first, one per cost group first."""
    costs = {}
    for fmt in formats:
        cost = parse_format(fmt).row_access_cost(matrix)
        if cost is not None:
            costs[fmt] = cost
    ranked = sorted(costs, key=lambda fmt: (costs[fmt], fmt))
    chosen, groups_seen = [], set()
    for fmt in ranked:  # the best of each cost group, in cost order
        group = parse_format(fmt).cost_group()
        if group not in groups_seen:
            groups_seen.add(group)
            chosen.append(fmt)
    chosen = chosen[:count]
    chosen += [fmt for fmt in ranked if fmt not in chosen][:count - len(chosen)]
    return sorted(chosen, key=lambda fmt: (costs[fmt], fmt))


def shortlist(matrix, device: str, *, limit: int, op: str = "spmm", ranked: int = DEFAULT_RANKED_FORMATS,
              extra_formats=(), knob_settings=None) -> list[dict]:
    """At most ``limit`` candidate configs for ``op`` on ``matrix``: the default format, ``extra_formats``
    and the ``ranked`` cheapest formats by static cost, x knob settings.

    Every config is a complete point of ``search_space(op, matrix, device)`` (all its knobs set),
    so ``compile_spmm(A, feat, **config)`` accepts it.
    """
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"limit must be a positive int (candidates per dataset and feature size), got {limit!r}")
    if isinstance(ranked, bool) or not isinstance(ranked, int) or ranked < 0:
        raise ValueError(f"ranked must be a non-negative int, got {ranked!r}")
    space = search_space(op, matrix, device)
    first = space.formats[0]
    formats = [first] + [fmt for fmt in extra_formats if fmt != first]
    formats += [fmt for fmt in ranked_formats(matrix, space.formats, ranked) if fmt not in formats]
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
