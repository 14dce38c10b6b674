"""Max and min aggregation (torch.ops.sparsetir.spmm_reduce) equal PyG's: SAGEConv for every aggr from
copied weights, forward and gradients, ties split as PyG's (the zeros after a relu), empty rows 0;
gradcheck in float64; bad input refused before a kernel runs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.nn import GraphSAGE, NeighborSampler, SAGEConv
from sparsetir.ops.torch_aggregate import spmm_reduce

pyg = pytest.importorskip("torch_geometric.nn")

RNG = np.random.default_rng(0)
A = sp.random(60, 50, density=0.08, format="lil", random_state=1)
A[[0, 10, 59]] = 0  # empty rows
A = A.tocsr()
A.eliminate_zeros()
INDPTR, INDICES = torch.from_numpy(A.indptr.astype(np.int64)), torch.from_numpy(A.indices.astype(np.int64))
ROWS = np.repeat(np.arange(60), np.diff(A.indptr))
EDGES = torch.from_numpy(np.stack([A.indices, ROWS]).astype(np.int64))  # PyG: row 0 sources, row 1 targets


def _torch_reference(x: torch.Tensor, reduce: str) -> torch.Tensor:
    """PyG's CPU path: scatter_reduce into zeros, include_self=False."""
    index = torch.from_numpy(ROWS)[:, None].expand(-1, x.shape[1])
    return x.new_zeros(60, x.shape[1]).scatter_reduce(0, index, x[EDGES[0]], reduce=f"a{reduce}",
                                                       include_self=False)


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_spmm_reduce_equals_pyg_scatter_with_ties_and_empty_rows(reduce):
    assert (np.diff(A.indptr) == 0).any()
    x = torch.from_numpy(RNG.integers(-2, 3, (50, 6)).astype(np.float32))  # integers: ties everywhere, zeros too
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, expected = spmm_reduce(INDPTR, INDICES, ours, 50, reduce), _torch_reference(theirs, reduce)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(ours.grad, theirs.grad)


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_gradcheck_float64(reduce):
    x = torch.randn(50, 3, dtype=torch.float64, requires_grad=True)  # continuous: no ties
    assert torch.autograd.gradcheck(lambda x: spmm_reduce(INDPTR, INDICES, x, 50, reduce), (x,))


@pytest.mark.parametrize("channels", [(8, 5), (5, 8)], ids=["projects-first", "aggregates-first"])
@pytest.mark.parametrize("aggr", ["mean", "sum", "max", "min"])
def test_sage_conv_equals_pyg_for_every_aggregation(aggr, channels):
    x = torch.randn(50, channels[0]).relu()  # after a relu: ties at 0
    ours, theirs = SAGEConv(*channels, aggr=aggr), pyg.SAGEConv(*channels, aggr=aggr)
    ours.load_state_dict(theirs.state_dict())
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    edges = EDGES[:, (EDGES[0] < 50) & (EDGES[1] < 50)]  # a graph of 50 nodes, 0 and 10 without neighbours
    out_ours, out_theirs = ours(x_ours, edges), theirs(x_theirs, edges)
    torch.testing.assert_close(out_ours, out_theirs, rtol=1e-5, atol=1e-6)
    grad = torch.randn_like(out_theirs)
    out_ours.backward(grad)
    out_theirs.backward(grad)
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, rtol=1e-5, atol=1e-6)
    for (name, mine), theirs_param in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(mine.grad, theirs_param.grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("aggr", ["max", "min"])
def test_graphsage_on_sampled_blocks_with_max_and_min_equals_pyg(aggr):
    graph = sp.random(300, 300, density=0.02, format="csr", random_state=2)
    graph = ((graph + graph.T) > 0).astype(np.float32).tocsr()
    ours, theirs = GraphSAGE(8, 6, 2, 3, aggr=aggr), pyg.GraphSAGE(8, 6, 2, 3, aggr=aggr)
    ours.load_state_dict(theirs.state_dict())
    for seeds in (np.arange(40), np.array([7]), np.zeros(0, np.int64)):  # a batch, one node, none
        batch = NeighborSampler(graph, [4, 4], seed=0).sample(seeds, np.random.default_rng(0))
        x = torch.randn(batch.n_id.size, 8)
        h = x
        for i, ((edges, size), conv) in enumerate(zip(batch.edge_indices(), theirs.convs)):
            h = conv((h, h[:size[1]]), edges, size=size)
            h = h.relu() if i < 1 else h
        torch.testing.assert_close(ours(x, batch.blocks), h, rtol=1e-5, atol=1e-6)


def test_bad_input_is_refused():
    x = torch.randn(50, 3)
    with pytest.raises(ValueError, match="reduce must be one of max, min"):
        spmm_reduce(INDPTR, INDICES, x, 50, "median")
    with pytest.raises(ValueError, match="B has 49 rows"):
        spmm_reduce(INDPTR, INDICES, x[:49], 50)
    bad = INDICES.clone()
    bad[0] = 50
    with pytest.raises(ValueError, match="out of range"):
        spmm_reduce(INDPTR, bad, x, 50)


def test_the_mean_as_a_row_scale_equals_scipy_and_passes_gradcheck():
    from sparsetir.ops.torch_aggregate import spmm_row_scaled

    degree = np.diff(A.indptr)
    scale = torch.from_numpy(1.0 / np.maximum(degree, 1))
    x = torch.randn(50, 3, dtype=torch.float64, requires_grad=True)
    mean = sp.diags(scale.numpy()) @ (A != 0).astype(np.float64)
    torch.testing.assert_close(spmm_row_scaled(INDPTR, INDICES, x, scale, 50), torch.from_numpy(mean @ x.detach().numpy()))
    assert torch.autograd.gradcheck(lambda x: spmm_row_scaled(INDPTR, INDICES, x, scale, 50), (x,))
    with pytest.raises(ValueError, match="scale must be"):
        spmm_row_scaled(INDPTR, INDICES, x, scale[:-1], 50)
