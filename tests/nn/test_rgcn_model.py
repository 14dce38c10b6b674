"""sparsetir.nn.RGCN: a stack of RGCNConv equal to PyG's layers with copied weights and to the float64
reference (the inference benchmark's check), and it trains as PyG's model does."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.formats.relational import read_relational_input
from sparsetir.nn import RGCN, RGCNGraph
from sparsetir.reference.rgcn import rgcn_inputs, rgcn_reference

pyg_nn = pytest.importorskip("torch_geometric.nn")


def random_graph(R=4, n=60, density=0.05, seed=0):
    matrices = [sp.random(n, n, density=density, format="csr", dtype=np.float32, random_state=seed + r)
                for r in range(R)]
    matrices[-1] = sp.csr_matrix((n, n), dtype=np.float32)  # a relation with no edges
    return [sp.csr_matrix((np.ones_like(A.data), A.indices, A.indptr), shape=A.shape) for A in matrices]


def model_from(inputs) -> RGCN:
    f_in, hidden, f_out = inputs.dims
    model = RGCN(f_in, hidden, f_out, inputs.graph.num_relations)
    with torch.no_grad():
        for conv, layer in zip(model.convs, inputs.layers):
            conv.weight.copy_(torch.from_numpy(layer.weight))
            conv.root.copy_(torch.from_numpy(layer.root))
            conv.bias.copy_(torch.from_numpy(layer.bias))
    return model


def check_model(matrix, adj, dims=(16, 12, 8)):
    inputs = rgcn_inputs(matrix, dims, seed=3)
    model = model_from(inputs)
    X = torch.from_numpy(inputs.X)
    with torch.no_grad():
        Y = model(X, adj)
    reference, tolerance = rgcn_reference(inputs)
    assert (np.abs(Y.numpy() - reference) <= tolerance).all()
    relation, row, col = matrix.coordinates()
    edge_index, edge_type = torch.from_numpy(np.stack([col, row])), torch.from_numpy(relation)
    convs = []
    for conv in model.convs:
        pyg = pyg_nn.RGCNConv(conv.in_channels, conv.out_channels, conv.num_relations)
        pyg.load_state_dict(conv.state_dict())
        convs.append(pyg)
    with torch.no_grad():
        expected = convs[1](torch.relu(convs[0](X, edge_index, edge_type)), edge_index, edge_type)
        torch.testing.assert_close(Y, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))
        torch.testing.assert_close(model(X, edge_index, edge_type), Y)


def test_equals_pyg_and_the_reference_on_a_random_graph_with_isolated_nodes_and_an_empty_relation():
    matrices = random_graph()
    check_model(read_relational_input(matrices), matrices)


def test_equals_pyg_on_aifb():
    from sparsetir import data

    try:
        graph = data.load_relational("aifb")
    except (FileNotFoundError, OSError) as error:
        pytest.skip(f"aifb unavailable: {error}")
    check_model(read_relational_input(graph), graph, dims=(32, 32, 32))


def test_graph_is_prepared_once_and_weight_changes_are_seen():
    matrices = random_graph(seed=5)
    graph = RGCNGraph(matrices)
    assert graph.matrix.num_relations == 5  # the identity relation carries the root weight
    model = RGCN(6, 6, 3, 4)
    assert model.prepare(graph) is graph
    assert model.prepare(matrices) is model.prepare(matrices)  # converted once
    X = torch.randn(60, 6)
    with torch.no_grad():
        first = model(X, graph)
        model.convs[1].root.mul_(2.0)  # in place: seen
        second = model(X, graph)
    assert not torch.allclose(first, second)
    assert len(graph.kernels) == 2  # one forward kernel per layer shape, reused across calls


def test_trains_like_pyg_with_bases_featureless_input_and_adam():
    """Ten Adam steps of the entity-classification model (featureless first layer, bases, mean) from
    the same weights: the same losses as PyG's layers."""
    g = torch.Generator().manual_seed(0)
    n, R = 40, 6
    edge_index, edge_type = torch.randint(0, n, (2, 300), generator=g), torch.randint(0, R, (300,), generator=g)
    y, train = torch.randint(0, 3, (n,), generator=g), torch.arange(0, n, 2)
    torch.manual_seed(0)
    ours = RGCN(n, 8, 3, R, num_bases=3)
    theirs = torch.nn.ModuleList([pyg_nn.RGCNConv(n, 8, R, num_bases=3), pyg_nn.RGCNConv(8, 3, R, num_bases=3)])
    theirs.load_state_dict({key.removeprefix("convs."): value for key, value in ours.state_dict().items()})
    losses = []
    for model, forward in ((ours, lambda: ours(None, edge_index, edge_type)),
                           (theirs, lambda: theirs[1](torch.relu(theirs[0](None, edge_index, edge_type)), edge_index,
                                                      edge_type))):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
        trajectory = []
        for _ in range(10):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(forward()[train], y[train])
            loss.backward()
            optimizer.step()
            trajectory.append(float(loss.detach()))
        losses.append(trajectory)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    assert losses[0][-1] < losses[0][0]


def test_bad_model_arguments():
    with pytest.raises(ValueError, match="positive int"):
        RGCN(5, 5, 2, 0)
    with pytest.raises(ValueError, match="num_layers"):
        RGCN(5, 5, 2, 3, num_layers=0)
    with pytest.raises(ValueError, match="act must be one of"):
        RGCN(5, 5, 2, 3, act="swish")
    with pytest.raises(ValueError, match="needs num_nodes"):
        RGCN(5, 5, 2, 3).prepare(torch.zeros((2, 1), dtype=torch.int64), torch.zeros(1, dtype=torch.int64))
