"""sparsetir.nn.RGCN: two layers equal to PyG RGCNConv(aggr="mean", root_weight=True, bias=True)
with copied weights, and the float64 reference; inference only, with clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.formats.relational import read_relational_input
from sparsetir.nn import RGCN, RGCNConv, RGCNGraph
from sparsetir.reference.rgcn import rgcn_inputs, rgcn_reference

pyg_nn = pytest.importorskip("torch_geometric.nn")


def pyg_pair(model: RGCN):
    """PyG convs with the model's weights (PyG's state-dict names are the same)."""
    convs = []
    for conv in (model.conv1, model.conv2):
        pyg = pyg_nn.RGCNConv(conv.in_dim, conv.out_dim, conv.num_relations, aggr="mean")
        pyg.load_state_dict(conv.state_dict())
        convs.append(pyg)
    return convs


def pyg_forward(convs, matrix, X):
    relation, row, col = matrix.coordinates()
    edge_index = torch.from_numpy(np.stack([col, row]))
    edge_type = torch.from_numpy(relation)
    with torch.no_grad():
        return convs[1](torch.relu(convs[0](X, edge_index, edge_type)), edge_index, edge_type)


def random_graph(R=4, n=60, density=0.05, seed=0):
    matrices = [sp.random(n, n, density=density, format="csr", dtype=np.float32, random_state=seed + r)
                for r in range(R)]
    matrices[-1] = sp.csr_matrix((n, n), dtype=np.float32)  # a relation with no edges
    return [sp.csr_matrix((np.ones_like(A.data), A.indices, A.indptr), shape=A.shape) for A in matrices]


def model_from(inputs) -> RGCN:
    R = inputs.graph.num_relations
    f_in, hidden, f_out = inputs.dims
    model = RGCN(R, f_in, hidden, f_out)
    with torch.no_grad():
        for conv, layer in zip((model.conv1, model.conv2), inputs.layers):
            conv.weight.copy_(torch.from_numpy(layer.weight))
            conv.root.copy_(torch.from_numpy(layer.root))
            conv.bias.copy_(torch.from_numpy(layer.bias))
    return model


def check_model(matrix, adj, dims=(16, 12, 8)):
    inputs = rgcn_inputs(matrix, dims, seed=3)
    model = model_from(inputs)
    X = torch.from_numpy(inputs.X)
    with torch.no_grad():
        Y = model(adj, X)
    reference, tolerance = rgcn_reference(inputs)
    assert (np.abs(Y.numpy() - reference) <= tolerance).all()
    expected = pyg_forward(pyg_pair(model), matrix, X)
    torch.testing.assert_close(Y, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))


def test_equals_pyg_on_a_random_graph_with_isolated_nodes_and_an_empty_relation():
    matrices = random_graph()
    check_model(read_relational_input(matrices), matrices)


def test_equals_pyg_on_aifb():
    from sparsetir import data

    try:
        graph = data.load_relational("aifb")
    except (FileNotFoundError, OSError) as error:
        pytest.skip(f"aifb unavailable: {error}")
    check_model(read_relational_input(graph), graph, dims=(32, 32, 32))


def test_graph_is_prepared_once_per_adj_and_weights_changes_are_seen():
    matrices = random_graph(seed=5)
    matrix = read_relational_input(matrices)
    graph = RGCNGraph(matrices)
    assert graph.matrix.num_relations == 5  # the identity relation carries the root weight
    model = RGCN(4, 6, 6, 3)
    assert model.prepare(graph) is graph
    X = torch.randn(60, 6)
    with torch.no_grad():
        first = model(graph, X)
        model.conv2.root.mul_(2.0)  # in place: the stacked weights must be rebuilt
        second = model(graph, X)
    assert not torch.allclose(first, second)
    inputs = rgcn_inputs(matrix, (6, 6, 3))
    assert (np.abs(second.numpy() - pyg_forward(pyg_pair(model), matrix, X).numpy()) < 1e-4).all()
    assert len(graph.kernels) == 2  # one kernel per layer shape, reused across calls
    del inputs


def test_backward_is_a_clear_error_not_a_missing_gradient():
    matrices = random_graph(seed=9)
    model = RGCN(4, 5, 5, 2)
    Y = model(matrices, torch.randn(60, 5))
    with pytest.raises(RuntimeError, match="inference-only"):
        Y.sum().backward()


def test_bad_input():
    matrices = random_graph(seed=2)
    model = RGCN(4, 5, 5, 2)
    with torch.no_grad():
        with pytest.raises(ValueError, match="4 relations, the graph 3"):
            model(matrices[:3], torch.randn(60, 5))
        with pytest.raises(ValueError, match=r"X must be \(60, 5\)"):
            model(matrices, torch.randn(60, 4))
        with pytest.raises(TypeError, match="torch tensor"):
            model(matrices, np.zeros((60, 5), np.float32))
        with pytest.raises(TypeError, match="float64"):
            model(matrices, torch.randn(60, 5, dtype=torch.float64))
        with pytest.raises(ValueError, match="square"):
            RGCNConv(1, 2, 2)([sp.csr_matrix((3, 4), dtype=np.float32)], torch.randn(4, 2))
    with pytest.raises(ValueError, match="positive int"):
        RGCN(0, 5, 5, 2)
