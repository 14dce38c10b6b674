"""RDF N-Triples (``.nt``, ``.nt.gz``), the format of the R-GCN entity graphs (AIFB, MUTAG, BGS, AM).

Each line is ``subject predicate object .``; subjects are IRIs ``<...>`` or blank nodes
``_:x``, predicates are IRIs, objects are either or a literal ``"..."`` (with an optional
``@lang`` or ``^^<type>``). As in R-GCN, every distinct subject and object term is an entity;
ids are given in sorted order of the terms, so they do not depend on the line order.
"""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .archive_member import open_member
from .rdf_graph import RelationalGraph
from .size_limits import size_limits

__all__ = ["read_ntriples", "read_ntriples_stream", "read_ntriples_member"]

_TRIPLE = re.compile(r'^(<[^>]*>|_:\S+)\s+(<[^>]*>)\s+(<[^>]*>|_:\S+|"(?:[^"\\]|\\.)*"(?:@[\w-]+|\^\^<[^>]*>)?)\s*\.\s*$')


def read_ntriples_stream(stream: BinaryIO, where: str, *, max_nnz: int | None = None,
                         max_bytes: int | None = None, with_terms: bool = False):
    """Parse N-Triples from a binary stream (gzip-compressed or plain).

    ``with_terms``: return ``(graph, terms)``, ``terms[k]`` the text of entity ``k`` (an IRI in
    ``<...>``, a blank node ``_:x`` or a literal), sorted. Reading stops with :class:`~sparsetir.data.size_limits.DataTooLargeError` once the text
    passes ``max_bytes`` (decompressed) or the triples pass ``max_nnz``.
    """
    limits = size_limits(max_nnz, max_bytes)
    read = 0
    head = stream.read(2)
    rest = io.BufferedReader(_Prefixed(head, stream))
    if head == b"\x1f\x8b":
        rest = gzip.GzipFile(fileobj=rest)
    subjects, predicates, objects = [], [], []
    try:
        text = io.TextIOWrapper(rest, encoding="utf-8")
        for lineno, line in enumerate(text, 1):
            read += len(line)
            if read > limits.max_bytes:
                limits.nbytes(read, where, "decompressed bytes (at least)")
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            match = _TRIPLE.match(line)
            if match is None:
                raise ValueError(f"{where}:{lineno}: not an N-Triples statement: {line[:80]!r}")
            subject, predicate, obj = match.groups()
            if len(subjects) >= limits.max_nnz:
                limits.entries(len(subjects) + 1, where, "triples (at least)")
            subjects.append(subject)
            predicates.append(predicate)
            objects.append(obj)
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise ValueError(f"{where}: truncated or corrupt N-Triples file: {err}") from None
    if not subjects:
        raise ValueError(f"{where}: no triples found")
    terms, term_ids = np.unique(np.array(subjects + objects, dtype=object), return_inverse=True)
    relations, relation_ids = np.unique(np.array(predicates, dtype=object), return_inverse=True)
    count = len(subjects)
    graph = RelationalGraph(
        num_entities=int(terms.size),
        relations=tuple(relations.tolist()),
        subjects=term_ids[:count].astype(np.int64),
        predicates=relation_ids.astype(np.int64),
        objects=term_ids[count:].astype(np.int64),
    )
    return (graph, tuple(terms.tolist())) if with_terms else graph


class _Prefixed(io.RawIOBase):
    """A stream with already-read leading bytes put back in front."""

    def __init__(self, prefix: bytes, stream: BinaryIO):
        self._prefix, self._stream = prefix, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._prefix:
            count = min(len(buffer), len(self._prefix))
            buffer[:count] = self._prefix[:count]
            self._prefix = self._prefix[count:]
            return count
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def read_ntriples(path: str | Path, *, max_nnz: int | None = None, max_bytes: int | None = None,
                  with_terms: bool = False):
    """Parse an ``.nt`` or ``.nt.gz`` file (size guards and ``with_terms`` as in :func:`read_ntriples_stream`)."""
    path = Path(path)
    with path.open("rb") as stream:
        return read_ntriples_stream(stream, str(path), max_nnz=max_nnz, max_bytes=max_bytes, with_terms=with_terms)


def read_ntriples_member(archive: str | Path, member: str, *, max_nnz: int | None = None,
                         max_bytes: int | None = None) -> RelationalGraph:
    """Parse the N-Triples member ``member`` of a ``.tgz`` / ``.zip`` archive (e.g. ``bgs.tgz``)."""
    with open_member(archive, member) as stream:
        return read_ntriples_stream(stream, f"{archive}[{member}]", max_nnz=max_nnz, max_bytes=max_bytes)
