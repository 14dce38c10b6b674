"""Seeded, vectorised uniform neighbour sampling for mini-batch training (GraphSAGE's sampler).

PyG's ``NeighborLoader`` needs pyg-lib or torch-sparse; this sampler needs numpy only, so every
library in a benchmark can be fed the same batches. For each hop from the seeds outward it
draws, for every target node, ``fanout`` distinct in-neighbours uniformly (all of them when it
has at most ``fanout``; ``-1``: all), with Floyd's algorithm run for all rows at once: ``fanout``
vectorised steps, no loop over nodes. Each hop gives one block (``adj_t`` in CSR): its targets
are the nodes so far, its sources those plus the new neighbours, in order of first appearance
(targets first, as DGL's message-flow graphs and PyG's bipartite layers expect). A block's
``indptr``/``indices`` are int32 where the sizes fit (the kernels' index dtype) and it carries a
proof of validity with its transpose (``Adjacency.proof``), so the ops bind it without validating,
converting or transposing it again; an edited block loses the proof and is validated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from ..formats.matrix import INT32_LIMIT
from ..ops import torch_ops
from .adjacency import Adjacency

__all__ = ["MiniBatch", "NeighborSampler", "sample_neighbors"]


@dataclass
class MiniBatch:
    """One sampled batch: ``n_id`` (global ids of the first layer's sources; the seeds first),
    ``blocks`` (one :class:`Adjacency` per layer, the input layer first; the last block's targets
    are the seeds) and ``batch_size`` (the number of seeds)."""

    n_id: np.ndarray
    blocks: list
    batch_size: int

    @property
    def seeds(self) -> np.ndarray:
        return self.n_id[:self.batch_size]

    def edge_indices(self) -> list[tuple[torch.Tensor, tuple[int, int]]]:
        """Each block as PyG's bipartite ``(edge_index, (num_sources, num_targets))`` (row 0 sources)."""
        out = []
        for block in self.blocks:
            degree = block.indptr[1:] - block.indptr[:-1]
            targets = torch.repeat_interleave(torch.arange(block.num_rows, dtype=torch.int64), degree)
            out.append((torch.stack([block.indices.long(), targets]), (block.num_cols, block.num_rows)))
        return out


def sample_neighbors(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray, fanout: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``nodes``, ``fanout`` distinct uniformly drawn in-neighbours (all when it has
    at most that many, or when ``fanout`` is -1); returns ``(counts, neighbours)``, the neighbours of
    each node contiguous, in the order of ``nodes``."""
    starts, degree = indptr[nodes], indptr[nodes + 1] - indptr[nodes]
    take = degree if fanout < 0 else np.minimum(degree, fanout)
    out_ptr = np.zeros(nodes.shape[0] + 1, dtype=np.int64)
    np.cumsum(take, out=out_ptr[1:])
    positions = np.empty(out_ptr[-1], dtype=np.int64)
    whole = take == degree  # every neighbour: consecutive positions
    rows = np.flatnonzero(whole)
    counts = take[rows]
    if counts.sum():
        row_of = np.repeat(rows, counts)
        within = np.arange(counts.sum(), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        positions[out_ptr[row_of] + within] = starts[row_of] + within
    rows = np.flatnonzero(~whole)
    if rows.size:  # Floyd: step s draws t in [0, d - k + s]; a repeat takes d - k + s instead
        d, k = degree[rows], fanout
        chosen = np.empty((rows.size, k), dtype=np.int64)
        for step in range(k):
            top = d - k + step
            t = np.floor(rng.random(rows.size) * (top + 1)).astype(np.int64)
            t = np.minimum(t, top)
            repeat = (chosen[:, :step] == t[:, None]).any(axis=1)
            chosen[:, step] = np.where(repeat, top, t)
        positions[(out_ptr[rows][:, None] + np.arange(k)).ravel()] = (starts[rows][:, None] + chosen).ravel()
    return take.astype(np.int64), indices[positions]


def _block(taken: np.ndarray, sources: np.ndarray, num_sources: int) -> Adjacency:
    """One block, adj_t in CSR (row = target, ``taken[i]`` entries each), in the kernels' index dtype
    (int32 where the sizes fit), with its proof of validity: the CSR is valid by construction
    (cumulative counts, local ids below ``num_sources``), and the proof carries its transpose."""
    index = np.int32 if max(sources.size, num_sources, taken.size + 1) <= INT32_LIMIT else np.int64
    indptr = np.zeros(taken.size + 1, dtype=index)
    np.cumsum(taken, out=indptr[1:])
    indptr_t, indices_t, proof = torch_ops.sample_structure(indptr, sources.astype(index), num_sources)
    return Adjacency(indptr_t, indices_t, None, num_sources, proof=proof)


class NeighborSampler:
    """Uniform neighbour sampling over ``adj_t`` (row = target, column = its in-neighbours).

    Parameters
    ----------
    adj_t : scipy sparse matrix, or (indptr, indices) numpy arrays
        The graph (square); for an undirected graph adj_t is the adjacency matrix.
    fanouts : sequence of int
        Neighbours per node per hop, from the seeds outward (PyG's ``num_neighbors``); one hop per
        layer; ``-1``: all.
    seed : int
        Batches depend only on (seed, epoch): every library gets the same ones.
    """

    def __init__(self, adj_t, fanouts, *, seed: int = 0):
        if sp.issparse(adj_t):
            csr = adj_t.tocsr()
            indptr, indices = csr.indptr, csr.indices
        else:
            indptr, indices = adj_t
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.indices = np.asarray(indices, dtype=np.int64)
        self.num_nodes = self.indptr.shape[0] - 1
        if self.indices.size and (self.indices.min() < 0 or self.indices.max() >= self.num_nodes):
            raise ValueError(f"adj_t has a column outside [0, {self.num_nodes}): a sampler needs a square graph")
        self.fanouts = [int(f) for f in fanouts]
        if not self.fanouts or any(f == 0 or f < -1 for f in self.fanouts):
            raise ValueError(f"fanouts must be positive (or -1: all), one per layer; got {list(fanouts)}")
        self.seed = int(seed)
        self._local = np.full(self.num_nodes, -1, dtype=np.int64)  # global -> local id, reset after each batch

    def sample(self, seeds, rng: np.random.Generator) -> MiniBatch:
        """The blocks of one batch of ``seeds`` (distinct node ids)."""
        seeds = np.asarray(seeds, dtype=np.int64)
        if seeds.size and (seeds.min() < 0 or seeds.max() >= self.num_nodes):
            raise ValueError(f"seed ids must lie in [0, {self.num_nodes})")
        local = self._local
        if np.unique(seeds).size != seeds.size:
            raise ValueError("seeds must be distinct")
        nodes = [seeds]
        local[seeds] = np.arange(seeds.size)
        count = seeds.size
        blocks = []
        try:
            for fanout in self.fanouts:
                targets = np.concatenate(nodes) if len(nodes) > 1 else nodes[0]
                taken, neighbours = sample_neighbors(self.indptr, self.indices, targets, fanout, rng)
                fresh = neighbours[local[neighbours] < 0]
                if fresh.size:
                    _, first = np.unique(fresh, return_index=True)
                    fresh = fresh[np.sort(first)]  # in order of first appearance
                    local[fresh] = np.arange(count, count + fresh.size)
                    nodes.append(fresh)
                    count += fresh.size
                blocks.append(_block(taken, local[neighbours], count))
            n_id = np.concatenate(nodes)
        finally:
            for part in nodes:
                local[part] = -1
        return MiniBatch(n_id, blocks[::-1], int(seeds.size))

    def batches(self, nodes, batch_size: int, *, epoch: int = 0, shuffle: bool = True) -> Iterator[MiniBatch]:
        """``nodes`` in batches of ``batch_size`` seeds (shuffled per epoch), each sampled."""
        rng = np.random.default_rng([self.seed, epoch])
        nodes = np.asarray(nodes, dtype=np.int64)
        order = rng.permutation(nodes) if shuffle else nodes
        for start in range(0, order.size, batch_size):
            yield self.sample(order[start:start + batch_size], rng)
