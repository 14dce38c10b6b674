"""The neighbour sampler: seeded, real in-neighbours, min(degree, fan-out) distinct ones per node drawn
uniformly, blocks whose targets lead their sources (what DGL and PyG's bipartite layers take)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.data.node_classification import load_node_classification
from sparsetir.nn import NeighborSampler
from sparsetir.nn.sampling import sample_neighbors

ADJ_T = load_node_classification("cora").adjacency


def _batches(seed=0, epoch=0, fanouts=(10, 10, 10)):
    return list(NeighborSampler(ADJ_T, fanouts, seed=seed).batches(np.arange(ADJ_T.shape[0]), 1024, epoch=epoch))


def test_batches_depend_only_on_the_seed_and_the_epoch():
    first, again, other = _batches(), _batches(), _batches(epoch=1)
    assert all(np.array_equal(a.n_id, b.n_id) for a, b in zip(first, again))
    assert all(np.array_equal(a.blocks[0].indices.numpy(), b.blocks[0].indices.numpy()) for a, b in zip(first, again))
    assert not np.array_equal(first[0].n_id, other[0].n_id)


def test_every_node_gets_min_degree_fanout_distinct_real_in_neighbours():
    degree = np.diff(ADJ_T.indptr)
    for batch in _batches():
        for block in batch.blocks:
            targets = batch.n_id[:block.num_rows]
            counts = np.diff(block.indptr.numpy())
            np.testing.assert_array_equal(counts, np.minimum(degree[targets], 10))
            sources = batch.n_id[block.indices.numpy()]
            rows = np.repeat(targets, counts)
            assert np.all(np.asarray(ADJ_T[rows, sources]).ravel() == 1)  # each is an edge of the graph
            pairs = rows * ADJ_T.shape[0] + sources
            assert np.unique(pairs).size == pairs.size  # without replacement


def test_blocks_chain_from_the_input_layer_to_the_seeds():
    for batch in _batches():
        assert batch.blocks[-1].num_rows == batch.batch_size
        for inner, outer in zip(batch.blocks, batch.blocks[1:]):
            assert inner.num_rows == outer.num_cols  # a layer's targets are the next layer's sources
        assert batch.blocks[0].num_cols == batch.n_id.size
        assert np.unique(batch.n_id).size == batch.n_id.size


def test_draws_are_uniform_over_the_neighbours():
    star = sp.csr_matrix((np.ones(20), np.arange(1, 21), [0, 20] + [20] * 20), shape=(21, 21))
    rng = np.random.default_rng(0)
    counts = np.zeros(21)
    for _ in range(2000):
        _, neighbours = sample_neighbors(star.indptr.astype(np.int64), star.indices.astype(np.int64),
                                         np.array([0]), 5, rng)
        assert np.unique(neighbours).size == 5
        counts[neighbours] += 1
    expected = 2000 * 5 / 20
    assert np.all(np.abs(counts[1:] - expected) < 5 * np.sqrt(expected))  # within 5 sigma of 500 each


def test_fanout_minus_one_takes_every_neighbour_and_bad_settings_are_refused():
    batch = next(NeighborSampler(ADJ_T, [-1], seed=0).batches(np.arange(100), 100))
    np.testing.assert_array_equal(np.diff(batch.blocks[0].indptr.numpy()), np.diff(ADJ_T.indptr)[batch.seeds])
    with pytest.raises(ValueError, match="fanouts must be positive"):
        NeighborSampler(ADJ_T, [10, 0])
    with pytest.raises(ValueError, match="seeds must be distinct"):
        NeighborSampler(ADJ_T, [5]).sample(np.array([1, 1]), np.random.default_rng(0))
