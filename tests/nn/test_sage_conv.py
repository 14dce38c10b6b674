"""sparsetir.nn.SAGEConv and GraphSAGE equal PyG's, forward and gradients, on cora with its real features;
the same constructor arguments, state_dict keys and initialisation; every structure form gives the same."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.data.node_classification import load_node_classification
from sparsetir.nn import Adjacency, GraphSAGE, NeighborSampler, SAGEConv, as_adjacency
from sparsetir.nn.sage import projects_first

pyg = pytest.importorskip("torch_geometric.nn")
pytestmark = [pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state"),
              pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")]

CORA = load_node_classification("cora")
X = torch.from_numpy(CORA.features.toarray())
X64 = X[:, :64].contiguous()  # the first 64 features: the same graph at a fraction of the dense work
ADJ_T = CORA.adjacency  # symmetric: adj_t is the adjacency
ROWS = np.repeat(np.arange(ADJ_T.shape[0]), np.diff(ADJ_T.indptr))
EDGE_INDEX = torch.from_numpy(np.stack([ADJ_T.indices, ROWS]).astype(np.int64))  # row 0 sources, row 1 targets


def _compare(ours, theirs, x_ours, x_theirs, structure_ours, structure_theirs, **kwargs):
    ours.load_state_dict(theirs.state_dict())
    out_ours, out_theirs = ours(x_ours, structure_ours, **kwargs), theirs(x_theirs, structure_theirs, **kwargs)
    torch.testing.assert_close(out_ours, out_theirs, rtol=1e-4, atol=1e-5)
    grad = torch.randn_like(out_theirs)
    out_ours.backward(grad)
    out_theirs.backward(grad)
    for (name, mine), theirs_param in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(mine.grad, theirs_param.grad, rtol=1e-4, atol=1e-4, msg=name)


def test_sage_conv_equals_pyg_forward_and_gradients_on_cora():
    x_ours, x_theirs = X.clone().requires_grad_(), X.clone().requires_grad_()
    _compare(SAGEConv(1433, 16), pyg.SAGEConv(1433, 16), x_ours, x_theirs, EDGE_INDEX, EDGE_INDEX)
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kwargs", [
    {"in_channels": 64, "out_channels": 16, "root_weight": False, "bias": False},
    {"in_channels": 64, "out_channels": 32, "normalize": True, "project": True},
], ids=["no-root-no-bias", "normalize-project"])
def test_sage_conv_options_equal_pyg(kwargs):
    x_ours, x_theirs = X64.clone().requires_grad_(), X64.clone().requires_grad_()
    _compare(SAGEConv(**kwargs), pyg.SAGEConv(**kwargs), x_ours, x_theirs, EDGE_INDEX, EDGE_INDEX)
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, rtol=1e-4, atol=1e-5)


def test_sage_conv_aggregating_first_and_bipartite_equals_pyg():
    hidden = torch.randn(ADJ_T.shape[0], 8)
    _compare(SAGEConv(8, 64), pyg.SAGEConv(8, 64), hidden, hidden, EDGE_INDEX, EDGE_INDEX)
    targets = 700  # a bipartite layer: every node a source, the first 700 the targets
    keep = EDGE_INDEX[1] < targets
    edges = EDGE_INDEX[:, keep]
    pair = (X64, X64[:targets])
    _compare(SAGEConv(64, 16), pyg.SAGEConv(64, 16), pair, pair, edges, edges, size=(X.shape[0], targets))


def test_same_state_dict_keys_and_initialisation_as_pyg():
    for kwargs in ({}, {"project": True}, {"bias": False}, {"root_weight": False}):
        torch.manual_seed(0)
        ours = SAGEConv(12, 7, **kwargs)
        torch.manual_seed(0)
        theirs = pyg.SAGEConv(12, 7, **kwargs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        for mine, their in zip(ours.state_dict().values(), theirs.state_dict().values()):
            assert torch.equal(mine, their)  # the same draws in the same order: reset_parameters matches
    torch.manual_seed(1)
    ours = GraphSAGE(12, 16, 3, 4)
    torch.manual_seed(1)
    theirs = pyg.GraphSAGE(12, 16, 3, 4)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), theirs.state_dict().values()))
    before = ours.convs[0].lin_l.weight.clone()
    ours.reset_parameters()
    assert not torch.equal(before, ours.convs[0].lin_l.weight)


def test_graphsage_equals_pyg_on_cora_forward_and_gradients():
    ours, theirs = GraphSAGE(64, 32, 3, 7), pyg.GraphSAGE(64, 32, 3, 7)
    _compare(ours, theirs, X64, X64, EDGE_INDEX, EDGE_INDEX)


def test_every_structure_form_gives_the_same_result():
    torch.manual_seed(0)
    model = GraphSAGE(64, 16, 2, 7)
    reference = model(X64, EDGE_INDEX)
    indptr, indices = torch.from_numpy(ADJ_T.indptr.astype(np.int64)), torch.from_numpy(ADJ_T.indices.astype(np.int64))
    forms = {"indptr, indices": (indptr, indices), "scipy adj_t": ADJ_T,
             "torch CSR adj_t": torch.sparse_csr_tensor(indptr, indices, torch.ones(indices.shape[0]), size=ADJ_T.shape),
             "Adjacency": Adjacency(indptr, indices, None, ADJ_T.shape[1])}
    edge_index_type = pytest.importorskip("torch_geometric").EdgeIndex
    forms["EdgeIndex"] = edge_index_type(EDGE_INDEX, sparse_size=ADJ_T.shape)
    for name, form in forms.items():
        torch.testing.assert_close(model(X64, form), reference, rtol=1e-5, atol=1e-5, msg=name)


def test_sparse_features_give_the_dense_result_and_gradients():
    torch.manual_seed(0)
    model = GraphSAGE(1433, 16, 2, 7)
    sparse_x = torch.sparse_csr_tensor(torch.from_numpy(CORA.features.indptr.astype(np.int64)),
                                       torch.from_numpy(CORA.features.indices.astype(np.int64)),
                                       torch.from_numpy(CORA.features.data.copy()), size=CORA.features.shape)
    dense_out = model(X, EDGE_INDEX)
    dense_out.square().sum().backward()
    dense_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    sparse_out = model(sparse_x, EDGE_INDEX)
    sparse_out.square().sum().backward()
    torch.testing.assert_close(sparse_out, dense_out, rtol=1e-4, atol=1e-5)
    for mine, dense_grad in zip((p.grad for p in model.parameters()), dense_grads):
        torch.testing.assert_close(mine, dense_grad, rtol=1e-4, atol=1e-4)


def test_graphsage_on_sampled_blocks_equals_pyg_bipartite_layers():
    torch.manual_seed(0)
    ours = GraphSAGE(64, 16, 3, 7)
    theirs = pyg.GraphSAGE(64, 16, 3, 7)
    theirs.load_state_dict(ours.state_dict())
    batch = next(NeighborSampler(ADJ_T, [5, 5, 5], seed=0).batches(np.arange(600), 256))
    x = X64[torch.from_numpy(batch.n_id)]
    out = ours(x, batch.blocks)
    h = x
    for i, ((edges, size), conv) in enumerate(zip(batch.edge_indices(), theirs.convs)):
        h = conv((h, h[:size[1]]), edges, size=size)
        h = h.relu() if i < 2 else h
    assert out.shape == (256, 7)
    torch.testing.assert_close(out, h, rtol=1e-4, atol=1e-5)


def test_lazy_input_channels_and_errors():
    conv = SAGEConv(-1, 8)
    assert conv(torch.randn(5, 3), torch.tensor([[0, 1, 2], [1, 2, 0]])).shape == (5, 8)
    assert conv.lin_l.weight.shape == (8, 3)
    with pytest.raises(ValueError, match="aggregates with mean, sum, add, max, min"):
        SAGEConv(4, 8, aggr="median")
    with pytest.raises(TypeError, match="an edge_index tensor"):
        as_adjacency([1, 2, 3], 3)
    with pytest.raises(ValueError, match="3 source nodes but the features have 4 rows"):
        SAGEConv(4, 2, root_weight=False)(torch.randn(4, 4), (torch.tensor([0, 1]), torch.tensor([2])), size=(3, 1))


def test_the_layer_projects_first_exactly_when_that_is_cheaper():
    assert projects_first(1000, 1000, 10_000, 1433, 16)  # a graph: narrower output
    assert not projects_first(1000, 1000, 10_000, 16, 64)
    assert not projects_first(12_000, 1_000, 20_000, 767, 128)  # a block with far more sources than targets
    assert projects_first(100, 100, 1000, 16, 64, sparse_inputs=True)  # sparse features are never densified


def test_sum_aggregation_uses_the_weights_of_a_sparse_adj_t():
    adj_t = sp.csr_matrix(np.array([[0, 2.0, 0], [1.0, 0, 3.0], [0, 0, 0]], dtype=np.float32))
    conv = SAGEConv(2, 2, aggr="sum", root_weight=False, bias=False)
    with torch.no_grad():
        conv.lin_l.weight.copy_(torch.eye(2))
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    torch.testing.assert_close(conv(x, adj_t), torch.from_numpy(adj_t.toarray()) @ x)
