"""sparsetir.nn.RGCNConv is PyG's RGCNConv: arguments, state_dict, draws, semantics (multigraphs
counted edge by edge), forward and gradients, for every supported aggr and decomposition; the
checks of PyG's own test_rgcn_conv.py with the class swapped; gradcheck; clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.data import RelationalGraph
from sparsetir.nn import RGCNConv, RGCNGraph

pyg_nn = pytest.importorskip("torch_geometric.nn")

CONFS = [(None, None), (3, None), (None, 2)]  # (num_bases, num_blocks)
AGGRS = ["mean", "sum", "add"]


def multigraph(n=24, relations=4, edges=150, seed=0):
    """Random typed edges with repeats (40 edges given twice), self-loops, an empty relation and
    isolated nodes (the last four)."""
    g = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n - 4, (2, edges), generator=g)
    edge_type = torch.randint(0, relations - 1, (edges,), generator=g)  # the last relation stays empty
    loops = torch.arange(5).repeat(2, 1)
    edge_index = torch.cat([edge_index, edge_index[:, :40], loops], dim=1)
    edge_type = torch.cat([edge_type, edge_type[:40], torch.zeros(5, dtype=torch.int64)])
    return edge_index, edge_type


def pair(*args, **kwargs):
    """(ours, PyG's) from the same seed; their weights must come out equal."""
    torch.manual_seed(12345)
    ours = RGCNConv(*args, **kwargs)
    torch.manual_seed(12345)
    theirs = pyg_nn.RGCNConv(*args, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value), key
    return ours, theirs


def assert_same_gradients(ours, theirs, inputs_ours=(), inputs_theirs=(), atol=1e-5):
    for a, b in zip(inputs_ours, inputs_theirs):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=atol)
    theirs_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        torch.testing.assert_close(param.grad, theirs_params[name].grad, rtol=0, atol=atol, msg=name)


@pytest.mark.parametrize("conf", CONFS)
@pytest.mark.parametrize("aggr", AGGRS)
def test_equals_pyg_on_a_multigraph_forward_and_gradients(aggr, conf):
    edge_index, edge_type = multigraph()
    ours, theirs = pair(8, 6, 4, *conf, aggr=aggr)
    x = torch.randn(24, 8)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out_ours, out_theirs = ours(x_ours, edge_index, edge_type), theirs(x_theirs, edge_index, edge_type)
    torch.testing.assert_close(out_ours, out_theirs, rtol=0, atol=1e-5)
    grad = torch.randn_like(out_ours)
    out_ours.backward(grad)
    out_theirs.backward(grad)
    assert_same_gradients(ours, theirs, [x_ours], [x_theirs])


@pytest.mark.parametrize("num_bases", [None, 3])
@pytest.mark.parametrize("aggr", ["mean", "sum"])
def test_featureless_and_index_input_equal_pyg(aggr, num_bases):
    edge_index, edge_type = multigraph()
    ours, theirs = pair(24, 5, 4, num_bases, aggr=aggr)
    for x in (None, torch.arange(24).flip(0)):  # node j's input: its own row, or row x[j]
        ours.zero_grad()
        theirs.zero_grad()
        out_ours, out_theirs = ours(x, edge_index, edge_type), theirs(x, edge_index, edge_type)
        torch.testing.assert_close(out_ours, out_theirs, rtol=0, atol=1e-5)
        grad = torch.randn_like(out_ours)
        out_ours.backward(grad)
        out_theirs.backward(grad)
        assert_same_gradients(ours, theirs)


def test_pyg_test_rgcn_conv_equality_rgcn_against_fastrgcn():
    """PyG's test_rgcn_conv_equality with RGCNConv swapped: equal to FastRGCNConv (sum)."""
    x1 = torch.randn(4, 4)
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 3, 0, 1, 1, 2, 2, 3], [0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1]])
    edge_type = torch.tensor([0, 1, 1, 0, 0, 1, 2, 3, 3, 2, 2, 3])
    for num_bases, num_blocks in CONFS:
        torch.manual_seed(12345)
        conv1 = RGCNConv(4, 32, 4, num_bases, num_blocks, aggr="sum")
        torch.manual_seed(12345)
        conv2 = pyg_nn.FastRGCNConv(4, 32, 4, num_bases, num_blocks, aggr="sum")
        torch.testing.assert_close(conv1(x1, edge_index, edge_type), conv2(x1, edge_index, edge_type), rtol=0,
                                   atol=1e-5)
        if num_blocks is None:
            torch.testing.assert_close(conv1(None, edge_index, edge_type), conv2(None, edge_index, edge_type),
                                       rtol=0, atol=1e-5)


@pytest.mark.parametrize("conf", CONFS)
def test_pyg_test_rgcn_conv_basic_with_the_class_swapped(conf):
    """PyG's test_rgcn_conv_basic: shapes, repr, featureless = index input, bipartite layers."""
    num_bases, num_blocks = conf
    x1, x2 = torch.randn(4, 4), torch.randn(2, 16)
    idx1, idx2 = torch.arange(4), torch.arange(2)
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [0, 0, 1, 0, 1, 1]])
    edge_type = torch.tensor([0, 1, 1, 0, 0, 1])
    conv = RGCNConv(4, 32, 2, num_bases, num_blocks, aggr="sum")
    assert str(conv) == "RGCNConv(4, 32, num_relations=2)"
    assert conv(x1, edge_index, edge_type).size() == (4, 32)
    if num_blocks is None:
        out2 = conv(None, edge_index, edge_type)
        torch.testing.assert_close(conv(idx1, edge_index, edge_type), out2, rtol=0, atol=1e-5)
        assert out2.size() == (4, 32)
    conv = RGCNConv((4, 16), 32, 2, num_bases, num_blocks, aggr="sum")
    assert str(conv) == "RGCNConv((4, 16), 32, num_relations=2)"
    theirs = pyg_nn.RGCNConv((4, 16), 32, 2, num_bases, num_blocks, aggr="sum")
    theirs.load_state_dict(conv.state_dict())
    out1 = conv((x1, x2), edge_index, edge_type)
    assert out1.size() == (2, 32)
    torch.testing.assert_close(out1, theirs((x1, x2), edge_index, edge_type), rtol=0, atol=1e-5)
    if num_blocks is None:
        out2 = conv((None, idx2), edge_index, edge_type)
        assert out2.size() == (2, 32)
        torch.testing.assert_close(conv((idx1, idx2), edge_index, edge_type), out2, rtol=0, atol=1e-5)
        torch.testing.assert_close(out2, theirs((None, idx2), edge_index, edge_type), rtol=0, atol=1e-5)


def test_relational_inputs_are_a_second_form_with_edges_counted():
    """A list of per-relation matrices (entries: edge counts) and a relational graph (every triple an
    edge) give what the same edges as edge_index/edge_type give."""
    edge_index, edge_type = multigraph()
    conv = RGCNConv(8, 5, 4)
    x = torch.randn(24, 8)
    expected = conv(x, edge_index, edge_type)
    src, dst, rel = edge_index[0].numpy(), edge_index[1].numpy(), edge_type.numpy()
    matrices = [sp.coo_matrix((np.ones(int((rel == r).sum())), (dst[rel == r], src[rel == r])), shape=(24, 24)).tocsr()
                for r in range(4)]  # duplicates summed: counts
    torch.testing.assert_close(conv(x, matrices), expected, rtol=0, atol=1e-5)
    triples = RelationalGraph(24, ("a", "b", "c", "d"), src.astype(np.int64), rel.astype(np.int64),
                              dst.astype(np.int64))
    torch.testing.assert_close(conv(x, triples), expected, rtol=0, atol=1e-5)
    graph = RGCNGraph.from_edges(edge_index, edge_type, 4, (24, 24))
    assert graph.num_edges == edge_index.shape[1]
    torch.testing.assert_close(conv(x, graph), expected, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="count edges"):
        RGCNGraph([m * 0.5 for m in matrices])


def test_no_edges_gives_the_root_term_and_bias():
    conv = RGCNConv(3, 2, 2)
    x = torch.randn(5, 3)
    empty = torch.zeros((2, 0), dtype=torch.int64)
    out = conv(x, empty, torch.zeros(0, dtype=torch.int64))
    torch.testing.assert_close(out, x @ conv.root + conv.bias)
    featureless = RGCNConv(5, 2, 2, num_bases=2)
    torch.testing.assert_close(featureless(None, empty, torch.zeros(0, dtype=torch.int64)),
                               featureless.root + featureless.bias)


def gradcheck_module(module, *inputs):
    """gradcheck in float64 over the module's parameters (and its tensor inputs that require grad)."""
    names = [name for name, _ in module.named_parameters()]
    weights = tuple(p.detach().clone().requires_grad_() for p in module.parameters())
    tensors = tuple(t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad)

    def call(*args):
        given = iter(args[len(weights):])
        rebuilt = [next(given) if isinstance(t, torch.Tensor) and t.requires_grad else t for t in inputs]
        return torch.func.functional_call(module, dict(zip(names, args[:len(weights)])), tuple(rebuilt))

    return torch.autograd.gradcheck(call, weights + tensors)


@pytest.mark.parametrize("conf", CONFS)
def test_gradcheck_float64(conf):
    edge_index, edge_type = multigraph(n=10, relations=3, edges=30, seed=3)
    x = torch.randn(10, 4, dtype=torch.float64, requires_grad=True)
    assert gradcheck_module(RGCNConv(4, 4, 3, *conf).double(), x, edge_index, edge_type)
    if conf[1] is None:  # featureless: the weights' rows are the messages
        assert gradcheck_module(RGCNConv(10, 3, 3, conf[0]).double(), None, edge_index, edge_type)


def test_bad_input_is_a_clear_error():
    edge_index, edge_type = multigraph()
    conv = RGCNConv(8, 5, 4)
    x = torch.randn(24, 8)
    with pytest.raises(ValueError, match=r"edge_type\[3\] = 4 is not a relation id in \[0, 4\)"):
        bad = edge_type.clone()
        bad[3] = 4
        conv(x, edge_index, bad)
    with pytest.raises(ValueError, match="not a relation id"):
        conv(x, edge_index, -edge_type - 1)
    with pytest.raises(ValueError, match=r"edge_index\[0\] \(sources\)\[0\] = 24 is not a node id"):
        bad = edge_index.clone()
        bad[0, 0] = 24
        conv(x, bad, edge_type)
    with pytest.raises(ValueError, match="one relation id per edge"):
        conv(x, edge_index, edge_type[:-1])
    with pytest.raises(TypeError, match="needs edge_type"):
        conv(x, edge_index)
    with pytest.raises(TypeError, match="integer dtype"):
        conv(x, edge_index, edge_type.float())
    with pytest.raises(ValueError, match=r"x must be \(nodes, 8\)"):
        conv(torch.randn(24, 7), edge_index, edge_type)
    with pytest.raises(TypeError, match="float64"):
        conv(x.double(), edge_index, edge_type)
    with pytest.raises(ValueError, match="layer has 4 relations, the graph 3"):
        conv(x, [sp.csr_matrix((24, 24))] * 3)
    with pytest.raises(ValueError, match="both basis-decomposition and block-diagonal"):
        RGCNConv(8, 4, 2, num_bases=2, num_blocks=2)
    with pytest.raises(ValueError, match="aggregates with mean, sum, add; got aggr='max'"):
        RGCNConv(8, 4, 2, aggr="max")
    with pytest.raises(ValueError, match="must divide"):
        RGCNConv(8, 5, 2, num_blocks=2)
    with pytest.raises(TypeError, match=r"does not support the argument\(s\) \['flow'\]"):
        RGCNConv(8, 4, 2, flow="target_to_source")
    with pytest.raises(ValueError, match="Block-diagonal decomposition not supported for non-continuous"):
        RGCNConv(24, 4, 4, num_blocks=2)(None, edge_index, edge_type)
    with pytest.raises(ValueError, match=r"node indices, which must lie in \[0, 24\)"):
        RGCNConv(24, 4, 4)(torch.arange(24) + 1, edge_index, edge_type)
    RGCNConv(8, 4, 2, is_sorted=True)  # PyG's speed hint: accepted
