"""Graphs stored as networkx node-link JSON (``{"nodes": [...], "links": [...]}``), as in DGL's ppi.zip.

DGL's PPI archive keeps one JSON per split (``train_graph.json``, ``valid_graph.json``,
``test_graph.json``), each the disjoint union of that split's protein graphs with node ids
``0..n-1``. :func:`read_node_link_splits` stacks the splits block-diagonally into one graph.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .archive_member import open_member
from .csr_canonical import csr_from_coordinates
from .size_limits import SizeLimits, size_limits

__all__ = ["read_node_link_splits"]


def _node_link(document, where: str, limits: SizeLimits, nodes_before: int = 0,
               links_before: int = 0) -> tuple[int, np.ndarray, np.ndarray]:
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise ValueError(f"{where}: not a node-link graph (expected an object with 'nodes' and 'links')")
    links = document.get("links", document.get("edges"))
    if not isinstance(links, list):
        raise ValueError(f"{where}: node-link graph has no 'links' list")
    limits.entries(nodes_before + len(document["nodes"]), where, "nodes (all splits so far)")
    limits.entries(links_before + len(links), where, "links (all splits so far)")
    ids = [node.get("id") if isinstance(node, dict) else None for node in document["nodes"]]
    if not all(isinstance(i, int) for i in ids):
        raise ValueError(f"{where}: node ids must be integers")
    position = {node_id: k for k, node_id in enumerate(ids)}
    try:
        sources = np.fromiter((position[link["source"]] for link in links), np.int64, len(links))
        targets = np.fromiter((position[link["target"]] for link in links), np.int64, len(links))
    except (KeyError, TypeError) as err:
        raise ValueError(f"{where}: a link names an unknown node or lacks source/target ({err})") from None
    return len(ids), sources, targets


def read_node_link_splits(archive: str | Path, members: tuple[str, ...] = (
        "train_graph.json", "valid_graph.json", "test_graph.json"), *, max_nnz: int | None = None,
        max_bytes: int | None = None) -> sp.csr_matrix:
    """The block-diagonal union of the node-link graphs ``members`` of ``archive``.

    Each member is read under ``max_bytes`` and the node and link counts are checked against
    ``max_nnz`` (:mod:`sparsetir.data.size_limits`) before any array is built.
    """
    limits = size_limits(max_nnz, max_bytes)
    rows, cols, offset, links = [], [], 0, 0
    for member in members:
        where = f"{archive}[{member}]"
        with open_member(archive, member) as stream:
            raw = limits.read(stream, where)
        try:
            document = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as err:
            raise ValueError(f"{where}: invalid JSON: {err}") from None
        n, sources, targets = _node_link(document, where, limits, offset, links)
        rows.append(sources + offset)
        cols.append(targets + offset)
        offset += n
        links += len(sources)
    return csr_from_coordinates(np.concatenate(rows), np.concatenate(cols), (offset, offset))
