"""R-GCN entity classification: AIFB and MUTAG with their train/test splits, as PyG's ``Entities`` builds them.

``load_entities(name)`` returns an :class:`EntityClassification`: the entity graph's typed edges
with every triple ``s -p-> o`` giving two edges, ``s -> o`` of relation ``2 p`` and ``o -> s`` of
relation ``2 p + 1`` (so ``num_relations`` is twice the predicates), and the labelled entities of
the R-GCN paper's split (``trainingSet.tsv``, ``testSet.tsv``: the entity's IRI first, its label
last). Labels are numbered in sorted order of the training labels. The files resolve and are
verified like every registry file (cache, embedded ``data/``, mirror, download; sha256 recorded
here, as in the mirror's ``provenance.txt``).
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .ntriples import read_ntriples
from .registry import DataFile, entry
from .resolve import locate
from .size_limits import size_limits

__all__ = ["ENTITY_TASKS", "EntityClassification", "entity_tasks", "load_entities"]

_LATENT_GCN = "https://raw.githubusercontent.com/alexanderdesouza/latent-GCN/9a3b70966ae041f41105315ca4fc55e13af89681"


def _split(name: str, file: str, sha256: str, size: int) -> DataFile:
    return DataFile(f"rdf-{name}/{file}", sha256, size, f"{_LATENT_GCN}/data/{name}/{file}")


#: ``name -> (training split, test split)``; the graph is the registry's entry of the same name.
ENTITY_TASKS: dict[str, tuple[DataFile, DataFile]] = {
    "aifb": (_split("aifb", "trainingSet.tsv", "4960629668c6548215871321e4b6daaee24191f38f41ccfbc4de62016d18c5a7",
                    22927),
             _split("aifb", "testSet.tsv", "abe4a9e7c393164996d1fe7250d72ec1f1a7b350583f2dff5d880f60ec04b3b6", 5921)),
    "mutag": (_split("mutag", "trainingSet.tsv", "d2fe71b68bb25735465128b4aed50d9b165fa5ab92aa2e221fad3d1cd87b7297",
                     14283),
              _split("mutag", "testSet.tsv", "20e69309a037cbf0fb2b52be3eaa6c43888215cbc0b96e8f8bd9e2af55652a3f",
                     3581)),
}


@dataclass(frozen=True)
class EntityClassification:
    """Typed edges ``edge_index (2, E)`` (row 0 sources, row 1 targets) and ``edge_type (E,)`` over
    ``num_nodes`` entities, and the labelled entities (``train_idx``/``train_y``, ``test_idx``/``test_y``)."""

    name: str
    num_nodes: int
    num_relations: int
    edge_index: np.ndarray
    edge_type: np.ndarray
    train_idx: np.ndarray
    train_y: np.ndarray
    test_idx: np.ndarray
    test_y: np.ndarray
    classes: tuple

    @property
    def num_classes(self) -> int:
        return len(self.classes)


def entity_tasks() -> list[str]:
    """The names :func:`load_entities` knows."""
    return list(ENTITY_TASKS)


def _read_split(path: Path, terms: dict) -> tuple[list[int], list[str]]:
    """(entity ids, label texts) of a split file: a header, then ``entity<TAB>...<TAB>label`` rows."""
    limits = size_limits(None, None)
    if path.stat().st_size > limits.max_bytes:
        limits.nbytes(path.stat().st_size, str(path), "bytes")
    text = path.read_bytes()
    try:
        rows = list(csv.reader(io.StringIO(text.decode("utf-8")), delimiter="\t"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text: {error}") from None
    if len(rows) < 2 or len(rows[0]) < 2:
        raise ValueError(f"{path}: expected a header and tab-separated rows (entity ... label)")
    ids, labels = [], []
    for lineno, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != len(rows[0]):
            raise ValueError(f"{path}:{lineno}: {len(row)} fields, the header has {len(rows[0])}")
        entity = terms.get(f"<{row[0]}>")
        if entity is None:
            raise ValueError(f"{path}:{lineno}: entity {row[0]!r} is not in the graph")
        ids.append(entity)
        labels.append(row[-1])
    return ids, labels


@functools.lru_cache(maxsize=4)
def _parsed(name: str) -> EntityClassification:
    graph, terms = read_ntriples(locate(entry(name).files[0]), with_terms=True)
    index = {term: k for k, term in enumerate(terms)}
    train_ids, train_labels = _read_split(locate(ENTITY_TASKS[name][0]), index)
    test_ids, test_labels = _read_split(locate(ENTITY_TASKS[name][1]), index)
    classes = tuple(sorted(set(train_labels)))
    unknown = sorted(set(test_labels) - set(classes))
    if unknown:
        raise ValueError(f"{name}: test labels {unknown[:3]} do not occur in the training split")
    number = {label: k for k, label in enumerate(classes)}
    source, target = graph.subjects, graph.objects
    edge_index = np.concatenate([np.stack([source, target]), np.stack([target, source])], axis=1).astype(np.int64)
    edge_type = np.concatenate([2 * graph.predicates, 2 * graph.predicates + 1]).astype(np.int64)
    arrays = [edge_index, edge_type, np.asarray(train_ids, np.int64), np.asarray([number[y] for y in train_labels]),
              np.asarray(test_ids, np.int64), np.asarray([number[y] for y in test_labels])]
    for array in arrays:
        array.flags.writeable = False
    return EntityClassification(name, graph.num_entities, 2 * len(graph.relations), *arrays, classes)


def load_entities(name: str) -> EntityClassification:
    """The entity-classification task ``name`` (``"aifb"``, ``"mutag"``); parsed once per process
    (read-only arrays). ``DatasetUnavailableError`` when no route has a file."""
    if name not in ENTITY_TASKS:
        raise KeyError(f"no entity-classification task {name!r}; known: {', '.join(ENTITY_TASKS)}")
    return _parsed(name)
