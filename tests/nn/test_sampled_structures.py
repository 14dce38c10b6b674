"""Sampled blocks carry a proof of validity: the ops bind them without validating, converting or
transposing them again; a block edited after sampling, or a proof given for other tensors, is
validated like any user structure; gradients through sampled structures are exact."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.data.node_classification import load_node_classification
from sparsetir.nn import Adjacency, GraphSAGE, NeighborSampler
from sparsetir.nn.sage import _spmm
from sparsetir.ops import torch_ops

ADJ_T = load_node_classification("cora").adjacency


def _blocks(seeds, fanouts=(5, 5)):
    sampler = NeighborSampler(ADJ_T, fanouts, seed=0)
    return sampler.sample(np.asarray(seeds), np.random.default_rng(0))


def _scipy(block: Adjacency) -> sp.csr_matrix:
    nnz = block.indices.shape[0]
    return sp.csr_matrix((np.ones(nnz), block.indices.numpy(), block.indptr.numpy()),
                         shape=(block.num_rows, block.num_cols))


def test_sampled_blocks_are_int32_and_their_proof_spares_validation_and_transposition():
    torch_ops.clear_cache()
    batch = _blocks(np.arange(0, 2708, 7))
    for block in batch.blocks:
        assert block.indptr.dtype == torch.int32 and block.indices.dtype == torch.int32
        x = torch.randn(block.num_cols, 16, dtype=torch.float32, requires_grad=True)
        out = _spmm(block, x)
        out.square().sum().backward()
        A = _scipy(block)
        torch.testing.assert_close(out.detach(), torch.from_numpy((A @ x.detach().double().numpy()).astype(np.float32)),
                                   rtol=1e-5, atol=1e-5)
        expected = A.T @ (2 * out.detach().double().numpy())
        torch.testing.assert_close(x.grad, torch.from_numpy(expected.astype(np.float32)), rtol=1e-4, atol=1e-4)
    stats = torch_ops.stats()
    assert stats["misses"] == 0 and stats["validate_s"] == 0.0  # every structure came with its proof


def test_a_block_edited_after_sampling_is_validated():
    batch = _blocks(np.arange(50))
    block = batch.blocks[-1]
    torch_ops.clear_cache()
    block.indices[0] = block.num_cols + 5  # in place: the version counter moves, so the proof no longer applies
    assert not torch_ops.adopt(block.proof, block.indptr, block.indices)
    with pytest.raises(ValueError, match="out of range"):
        _spmm(block, torch.randn(block.num_cols, 4))
    block.indices[0] = 0  # a valid edit: validated, then computed on the edited structure
    x = torch.randn(block.num_cols, 4, dtype=torch.float64)
    torch.testing.assert_close(_spmm(block, x), torch.from_numpy(_scipy(block) @ x.numpy()))
    assert torch_ops.stats()["misses"] == 1


def test_a_proof_vouches_only_for_the_tensors_it_was_made_for():
    first, second = _blocks(np.arange(30)).blocks[0], _blocks(np.arange(30, 90)).blocks[0]
    assert torch_ops.adopt(first.proof, first.indptr, first.indices)
    assert not torch_ops.adopt(first.proof, second.indptr, second.indices)
    assert not torch_ops.adopt(first.proof, first.indptr.clone(), first.indices.clone())
    assert not torch_ops.adopt(object(), first.indptr, first.indices)  # anything else is no proof
    forged = Adjacency(second.indptr, second.indices, None, second.num_cols, proof=first.proof)
    x = torch.randn(second.num_cols, 3, dtype=torch.float64)
    torch.testing.assert_close(_spmm(forged, x), torch.from_numpy(_scipy(second) @ x.numpy()))


def test_gradcheck_through_sampled_structures():
    batch = _blocks(np.arange(12), fanouts=(3, 3))
    for block in batch.blocks:
        weights = torch.rand(block.indices.shape[0], dtype=torch.float64, requires_grad=True)
        x = torch.randn(block.num_cols, 3, dtype=torch.float64, requires_grad=True)
        structured = Adjacency(block.indptr, block.indices, weights, block.num_cols, proof=block.proof)
        assert torch.autograd.gradcheck(lambda w, x, s=structured: _spmm(s._replace(values=w), x), (weights, x))


@pytest.mark.parametrize("seeds", [np.zeros(0, np.int64), np.array([5]), np.array([0, 1])], ids=["empty", "one", "two"])
def test_empty_one_node_and_isolated_batches_train(seeds):
    isolated = sp.csr_matrix(ADJ_T[:40, :40])  # cora's first 40 nodes: several have no neighbour among them
    assert (np.diff(isolated.indptr) == 0).any()
    sampler = NeighborSampler(isolated, (4, 4), seed=1)
    batch = sampler.sample(seeds, np.random.default_rng(0))
    model = GraphSAGE(8, 6, 2, 3)
    x = torch.randn(batch.n_id.size, 8)
    out = model(x, batch.blocks)
    assert out.shape == (seeds.size, 3)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
