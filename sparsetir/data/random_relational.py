"""Relational graphs by name: a registered one, or a seeded random one (``relational:<nodes>:<relations>:<edges>``).

The R-GCN benchmark, its tests and the smoke run name their graphs this way; a random graph has
``edges`` uniformly random typed edges (duplicates collapse when read), the same for the same seed.
"""

from __future__ import annotations

import re

import numpy as np

from .rdf_graph import RelationalGraph
from .registry import load_relational, relational_graphs

__all__ = ["RELATIONAL_PREFIX", "RELATIONAL_LIMITS", "check_relational_name", "parse_relational_spec",
           "random_relational", "relational_graph"]

#: A seeded random relational graph: ``relational:<nodes>:<relations>:<edges>`` (tests, the smoke run).
RELATIONAL_PREFIX = "relational:"
RELATIONAL_LIMITS = {"nodes": 1 << 22, "relations": 4096, "edges": 50_000_000}


def parse_relational_spec(name: str) -> tuple[int, int, int] | None:
    """``(nodes, relations, edges)`` of a ``relational:<n>:<R>:<E>`` spec, None for any other name;
    ``ValueError`` for a malformed spec or one past :data:`RELATIONAL_LIMITS`."""
    if not name.startswith(RELATIONAL_PREFIX):
        return None
    match = re.fullmatch(r"relational:(\d+):(\d+):(\d+)", name)
    if not match:
        raise ValueError(f"bad relational graph spec {name!r}; expected relational:<nodes>:<relations>:<edges>")
    sizes = tuple(int(part) for part in match.groups())
    for (what, limit), value in zip(RELATIONAL_LIMITS.items(), sizes):
        if not 1 <= value <= limit:
            raise ValueError(f"relational graph spec {name!r}: {what} must lie in 1..{limit}, got {value}")
    return sizes


def random_relational(nodes: int, relations: int, edges: int, seed: int = 0) -> RelationalGraph:
    """A seeded relational graph: ``edges`` uniformly random typed edges (duplicates collapse when read)."""
    rng = np.random.default_rng(seed)
    return RelationalGraph(nodes, tuple(f"r{r}" for r in range(relations)), rng.integers(0, nodes, edges),
                           rng.integers(0, relations, edges), rng.integers(0, nodes, edges))


def check_relational_name(name: str) -> None:
    """``ValueError`` unless ``name`` is a registered relational graph or a ``relational:`` spec."""
    if parse_relational_spec(name) is None and name not in relational_graphs():
        raise ValueError(f"unknown relational graph {name!r}; known: {', '.join(relational_graphs())}, or "
                         f"{RELATIONAL_PREFIX}<nodes>:<relations>:<edges>")


def relational_graph(name: str, seed: int = 0) -> RelationalGraph:
    """The graph ``name``: generated for a ``relational:`` spec, else through ``load_relational`` (embedded,
    cache, mirror, download; ``DatasetUnavailableError`` when no route has it)."""
    check_relational_name(name)
    sizes = parse_relational_spec(name)
    return random_relational(*sizes, seed=seed) if sizes else load_relational(name)
