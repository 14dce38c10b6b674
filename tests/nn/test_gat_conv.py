"""sparsetir.nn.GATConv is PyG's GATConv: arguments, state_dict (loads from PyG's), draws,
semantics (repeated edges, self-loops removed and re-added, isolated nodes, bipartite inputs)
forward and gradients for heads 1 and 8, concat on and off; every structure form; attention
dropout; gradcheck; arguments it does not support refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.nn import GATConv

pyg_nn = pytest.importorskip("torch_geometric.nn")


def multigraph(n=30, edges=120, seed=0):
    """Random edges with repeats (20 given twice), self-loops, and isolated nodes (the last three)."""
    g = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n - 3, (2, edges), generator=g)
    return torch.cat([edge_index, edge_index[:, :20], torch.arange(5).repeat(2, 1)], dim=1)


def pair(*args, **kwargs):
    """(ours, PyG's) from the same seed; their weights must come out equal, in the same keys."""
    torch.manual_seed(12345)
    ours = GATConv(*args, **kwargs)
    torch.manual_seed(12345)
    theirs = pyg_nn.GATConv(*args, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value), key
    return ours, theirs


def assert_same(ours, theirs, x, *args, atol=2e-5):
    """Equal outputs, input gradients and parameter gradients for one random output gradient."""
    inputs = x if isinstance(x, tuple) else (x,)
    mine = tuple(t.clone().requires_grad_() for t in inputs)
    other = tuple(t.clone().requires_grad_() for t in inputs)
    out, expected = ours(mine if isinstance(x, tuple) else mine[0], *args), theirs(
        other if isinstance(x, tuple) else other[0], *args)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=atol)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    for a, b in zip(mine, other):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=atol)
    params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        torch.testing.assert_close(param.grad, params[name].grad, rtol=1e-4, atol=atol, msg=name)


@pytest.mark.parametrize("heads", [1, 8])
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_equals_pyg_on_a_multigraph_forward_and_gradients(heads, concat, add_self_loops):
    ours, theirs = pair(16, 5, heads=heads, concat=concat, add_self_loops=add_self_loops)
    assert_same(ours, theirs, torch.randn(30, 16), multigraph())


def test_load_state_dict_from_pyg_and_residual_bipartite_layers():
    theirs = pyg_nn.GATConv((16, 12), 6, heads=3, residual=True, negative_slope=0.1)
    ours = GATConv((16, 12), 6, heads=3, residual=True, negative_slope=0.1)
    ours.load_state_dict(theirs.state_dict())
    edge_index = torch.stack([torch.randint(0, 20, (60,)), torch.randint(0, 9, (60,))])
    assert_same(ours, theirs, (torch.randn(20, 16), torch.randn(9, 12)), edge_index)
    assert str(ours) == str(theirs) == "GATConv((16, 12), 6, heads=3)"
    shared = pyg_nn.GATConv(16, 4, heads=2, concat=False, bias=False)
    mine = GATConv(16, 4, heads=2, concat=False, bias=False)
    mine.load_state_dict(shared.state_dict())
    assert_same(mine, shared, (torch.randn(20, 16), torch.randn(9, 16)), edge_index)


def test_every_structure_form_gives_the_same():
    edge_index = multigraph()
    conv = GATConv(8, 4, heads=2)
    x = torch.randn(30, 8)
    expected = conv(x, edge_index)
    src, dst = edge_index.numpy()
    adj_t = sp.coo_matrix((np.ones(src.size, np.float32), (dst, src)), shape=(30, 30)).tocsr()  # repeats summed
    torch.testing.assert_close(conv(x, torch.from_numpy(adj_t.toarray()).to_sparse_csr()),
                               conv(x, adj_t), rtol=1e-6, atol=1e-6)
    from torch_geometric import EdgeIndex

    torch.testing.assert_close(conv(x, EdgeIndex(edge_index, sparse_size=(30, 30))), expected)
    order = torch.argsort(edge_index[1], stable=True)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.bincount(edge_index[1], minlength=30).cumsum(0)])
    torch.testing.assert_close(conv(x, (indptr, edge_index[0][order])), expected, rtol=1e-6, atol=1e-6)
    theirs = pyg_nn.GATConv(8, 4, heads=2)
    theirs.load_state_dict(conv.state_dict())
    distinct = torch.from_numpy(np.stack(adj_t.nonzero()[::-1]).astype(np.int64))
    torch.testing.assert_close(conv(x, adj_t), theirs(x, distinct), rtol=1e-5, atol=1e-5)


def test_sparse_features_project_by_spmm_with_the_same_result_and_gradients():
    conv = GATConv(12, 4, heads=2, residual=True)
    x = torch.randn(30, 12) * (torch.rand(30, 12) < 0.2)
    expected = conv(x, multigraph())
    grad = torch.randn_like(expected)
    expected.backward(grad)
    dense_grads = [p.grad.clone() for p in conv.parameters()]
    conv.zero_grad()
    out = conv(x.to_sparse_csr(), multigraph())
    out.backward(grad)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for a, b in zip(conv.parameters(), dense_grads):
        torch.testing.assert_close(a.grad, b, rtol=1e-4, atol=1e-5)


def test_attention_weights_and_isolated_nodes_without_self_loops():
    conv = GATConv(8, 3, heads=2, add_self_loops=False)
    theirs = pyg_nn.GATConv(8, 3, heads=2, add_self_loops=False)
    theirs.load_state_dict(conv.state_dict())
    edge_index = multigraph()
    x = torch.randn(30, 8)
    out, (edges, alpha) = conv(x, edge_index, return_attention_weights=True)
    torch.testing.assert_close(out[-3:], conv.bias.expand(3, -1))  # no in-edges: the bias alone
    _, (their_edges, their_alpha) = theirs(x, edge_index, return_attention_weights=True)
    key = lambda e, a: sorted(zip(e[1].tolist(), e[0].tolist(), a.round(decimals=5).tolist()))  # noqa: E731
    assert key(edges, alpha.detach()) == key(their_edges, their_alpha.detach())


def test_attention_dropout_trains_and_eval_is_deterministic():
    conv = GATConv(8, 4, heads=2, dropout=0.5)
    x, edge_index = torch.randn(30, 8), multigraph()
    conv.train()
    torch.manual_seed(0)
    first = conv(x, edge_index)
    torch.manual_seed(1)
    assert not torch.allclose(first, conv(x, edge_index))
    first.sum().backward()
    assert conv.att_src.grad is not None and conv.att_src.grad.abs().sum() > 0
    conv.eval()
    theirs = pyg_nn.GATConv(8, 4, heads=2, dropout=0.5).eval()
    theirs.load_state_dict(conv.state_dict())
    torch.testing.assert_close(conv(x, edge_index), theirs(x, edge_index), rtol=1e-5, atol=1e-5)


def test_gradcheck_float64():
    conv = GATConv(4, 3, heads=2, residual=True).double()
    edge_index = multigraph(n=10, edges=30, seed=3)
    x = torch.randn(10, 4, dtype=torch.float64, requires_grad=True)
    names = [name for name, _ in conv.named_parameters()]
    weights = tuple(p.detach().clone().requires_grad_() for p in conv.parameters())

    def call(x, *params):
        return torch.func.functional_call(conv, dict(zip(names, params)), (x, edge_index))

    assert torch.autograd.gradcheck(call, (x, *weights))


def test_unsupported_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="edge_dim=4"):
        GATConv(8, 4, edge_dim=4)
    with pytest.raises(ValueError, match="aggr='mean'"):
        GATConv(8, 4, aggr="mean")
    with pytest.raises(TypeError, match=r"does not support the argument\(s\) \['share_weights'\]"):
        GATConv(8, 4, share_weights=True)
    with pytest.raises(ValueError, match="lazy -1 is not supported"):
        GATConv(-1, 4)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        GATConv(8, 4, dropout=1.0)
    conv = GATConv(8, 4)
    with pytest.raises(ValueError, match="does not support edge_attr"):
        conv(torch.randn(30, 8), multigraph(), torch.randn(145, 2))
    with pytest.raises(ValueError, match="node id"):
        conv(torch.randn(20, 8), multigraph())
    GATConv(8, 4, fill_value=0.0, flow="source_to_target")  # PyG's defaults and unused values: accepted
