"""A relational (knowledge) graph: entities, relation types and typed edges, as for R-GCN."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_coordinates

__all__ = ["RelationalGraph", "check_triples"]


@dataclass(frozen=True)
class RelationalGraph:
    """Edges ``subject --relation--> object`` over ``num_entities`` entities (ids 0..n-1)."""

    num_entities: int
    relations: tuple[str, ...]
    subjects: np.ndarray
    predicates: np.ndarray
    objects: np.ndarray

    def __post_init__(self):
        if isinstance(self.num_entities, bool) or not isinstance(self.num_entities, (int, np.integer)) \
                or self.num_entities < 0:
            raise ValueError(f"RelationalGraph.num_entities must be an int >= 0, got {self.num_entities!r}")
        object.__setattr__(self, "num_entities", int(self.num_entities))
        if isinstance(self.relations, str) or not all(isinstance(r, str) for r in self.relations):
            raise TypeError(f"RelationalGraph.relations must be a sequence of names, got {self.relations!r}")
        object.__setattr__(self, "relations", tuple(self.relations))
        for field in ("subjects", "predicates", "objects"):
            object.__setattr__(self, field, _frozen_ids(getattr(self, field), field))
        lengths = {self.subjects.shape, self.predicates.shape, self.objects.shape}
        if len(lengths) != 1:
            raise ValueError(f"subjects, predicates and objects must have one length, got {sorted(lengths)}")
        check_triples(self)

    @property
    def num_edges(self) -> int:
        return int(self.subjects.size)

    def adjacency(self) -> sp.csr_matrix:
        """All relations merged: a directed entity × entity pattern (duplicates collapse)."""
        n = self.num_entities
        return csr_from_coordinates(self.subjects, self.objects, (n, n))

    def relation_adjacency(self, relation: int) -> sp.csr_matrix:
        """The directed pattern of one relation type."""
        keep = self.predicates == relation
        n = self.num_entities
        return csr_from_coordinates(self.subjects[keep], self.objects[keep], (n, n))


def _frozen_ids(ids, field: str) -> np.ndarray:
    """``ids`` as a read-only 1-D int64 array (a copy: the graph cannot be changed after it was checked)."""
    array = np.asarray(ids)
    if array.ndim != 1:
        raise ValueError(f"RelationalGraph.{field} must be 1-D, got shape {array.shape}")
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"RelationalGraph.{field} must hold integer ids, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=True)
    array.flags.writeable = False
    return array


def check_triples(graph) -> None:
    """Every id of a relational graph (or an object with its fields) in range, naming the field:
    ``predicates`` in ``[0, len(relations))``, ``subjects`` and ``objects`` in ``[0, num_entities)``."""
    n, R = int(graph.num_entities), len(graph.relations)
    for field, extent, what in (("subjects", n, "entity"), ("objects", n, "entity"), ("predicates", R, "relation")):
        ids = np.asarray(getattr(graph, field))
        if ids.size and (ids.dtype == np.bool_ or not np.issubdtype(ids.dtype, np.integer)):
            raise TypeError(f"RelationalGraph.{field} must hold integer ids, got dtype {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= extent):
            bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
            at = int(np.flatnonzero(ids == bad)[0])
            raise ValueError(f"RelationalGraph.{field}[{at}] = {bad} is out of range: {what} ids lie in "
                             f"[0, {extent})")
