"""Open Graph Benchmark archives (``arxiv.zip``, ``proteins.zip``, ``biokg.zip``), read in place.

Homogeneous graphs (ogbn-arxiv, ogbn-proteins) keep ``<name>/raw/edge.csv.gz`` (one
``source,target`` pair per line, no header) and ``num-node-list.csv.gz`` (the node count).
The knowledge graph ogbl-biokg keeps one ``raw/relations/<head>___<relation>___<tail>/edge.csv.gz``
per relation, with node ids local to each node type, and the type sizes in
``raw/num-node-dict.csv.gz`` (a header row of type names, then a row of counts). Its entities are
numbered type by type, in the order of that header.

Both readers take ``max_nnz`` / ``max_bytes`` (:mod:`sparsetir.data.size_limits`): every member
is decompressed under ``max_bytes`` (a small zip of highly compressible CSV is refused), and the
node and edge counts are checked before any array is built.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .archive_member import archive_members, open_member
from .csr_canonical import csr_from_coordinates
from .rdf_graph import RelationalGraph
from .size_limits import SizeLimits, size_limits

__all__ = ["read_ogb_edge_archive", "read_ogb_knowledge_graph"]


def _csv_rows(archive: Path, member: str, limits: SizeLimits) -> list[str]:
    where = f"{archive}[{member}]"
    with open_member(archive, member) as stream:
        compressed = limits.read(stream, where)
    try:
        text = limits.gunzip(compressed, where).decode("ascii")
    except UnicodeDecodeError as err:
        raise ValueError(f"{where}: truncated or corrupt csv.gz: {err}") from None
    return [line for line in text.splitlines() if line.strip()]


def _edges(archive: Path, member: str, limits: SizeLimits) -> np.ndarray:
    rows = _csv_rows(archive, member, limits)
    limits.entries(len(rows), f"{archive}[{member}]", "edges")
    try:
        edges = np.loadtxt(io.StringIO("\n".join(rows)), delimiter=",", dtype=np.int64, ndmin=2)
    except ValueError as err:
        raise ValueError(f"{archive}[{member}]: expected 'source,target' integer pairs: {err}") from None
    if edges.size and edges.shape[1] != 2:
        raise ValueError(f"{archive}[{member}]: expected two columns, found {edges.shape[1]}")
    return edges.reshape(-1, 2)


def read_ogb_edge_archive(path: str | Path, name: str, *, max_nnz: int | None = None,
                          max_bytes: int | None = None) -> sp.csr_matrix:
    """The directed adjacency of OGB node-property graph ``name`` (``arxiv``, ``proteins``)."""
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    counts = _csv_rows(path, f"{name}/raw/num-node-list.csv.gz", limits)
    try:
        n = sum(int(value) for value in counts)
    except ValueError:
        raise ValueError(f"{path}: num-node-list.csv.gz must hold node counts, got {counts[:3]}") from None
    limits.shape((n, n), f"{path}[{name}/raw/num-node-list.csv.gz]")
    edges = _edges(path, f"{name}/raw/edge.csv.gz", limits)
    return csr_from_coordinates(edges[:, 0], edges[:, 1], (n, n))


def read_ogb_knowledge_graph(path: str | Path, name: str = "biokg", *, max_nnz: int | None = None,
                             max_bytes: int | None = None) -> RelationalGraph:
    """The typed edges of OGB knowledge graph ``name`` (``biokg``), with global entity ids."""
    path = Path(path)
    limits = size_limits(max_nnz, max_bytes)
    header, counts = (_csv_rows(path, f"{name}/raw/num-node-dict.csv.gz", limits) + ["", ""])[:2]
    types = header.split(",")
    try:
        sizes = [int(value) for value in counts.split(",")]
    except ValueError:
        raise ValueError(f"{path}: num-node-dict.csv.gz must be a header of types and a row of counts") from None
    if len(types) != len(sizes):
        raise ValueError(f"{path}: num-node-dict.csv.gz names {len(types)} node types but gives {len(sizes)} counts")
    limits.entries(sum(sizes), f"{path}[{name}/raw/num-node-dict.csv.gz]", "entities")
    offsets = dict(zip(types, np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()))
    prefix = f"{name}/raw/relations/"
    relation_dirs = sorted({m[len(prefix):].split("/")[0] for m in archive_members(path)
                            if m.startswith(prefix) and m.endswith("/edge.csv.gz")})
    if not relation_dirs:
        raise ValueError(f"{path}: no {prefix}<head>___<relation>___<tail>/edge.csv.gz members")
    subjects, predicates, objects = [], [], []
    edge_count = 0
    for relation_id, triplet in enumerate(relation_dirs):
        parts = triplet.split("___")
        if len(parts) != 3 or parts[0] not in offsets or parts[2] not in offsets:
            raise ValueError(f"{path}: relation folder {triplet!r} must be <head type>___<relation>___<tail type>")
        edges = _edges(path, f"{prefix}{triplet}/edge.csv.gz", limits)
        edge_count += len(edges)
        limits.entries(edge_count, str(path), "edges (all relations so far)")
        subjects.append(edges[:, 0] + offsets[parts[0]])
        objects.append(edges[:, 1] + offsets[parts[2]])
        predicates.append(np.full(len(edges), relation_id, dtype=np.int64))
    return RelationalGraph(int(sum(sizes)), tuple(relation_dirs), np.concatenate(subjects),
                           np.concatenate(predicates), np.concatenate(objects))
