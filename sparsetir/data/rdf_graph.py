"""A relational (knowledge) graph: entities, relation types and typed edges, as for R-GCN."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .csr_canonical import csr_from_coordinates

__all__ = ["RelationalGraph"]


@dataclass(frozen=True)
class RelationalGraph:
    """Edges ``subject --relation--> object`` over ``num_entities`` entities (ids 0..n-1)."""

    num_entities: int
    relations: tuple[str, ...]
    subjects: np.ndarray
    predicates: np.ndarray
    objects: np.ndarray

    def __post_init__(self):
        lengths = {self.subjects.shape, self.predicates.shape, self.objects.shape}
        if len(lengths) != 1:
            raise ValueError(f"subjects, predicates and objects must have one length, got {sorted(lengths)}")
        for ids, extent, what in ((self.subjects, self.num_entities, "subject"),
                                  (self.objects, self.num_entities, "object"),
                                  (self.predicates, len(self.relations), "relation")):
            if ids.size and (ids.min() < 0 or ids.max() >= extent):
                raise ValueError(f"{what} ids must lie in 0..{extent - 1}")

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
