"""GraphSAGE(dropout_in_aggregation=True): in training mode each hidden dropout is read inside the
next layer's op, and the model equals PyG's SAGEConv layers fed F.dropout's formula with the same
masks (full graph and sampled blocks of cora), gradients included; eval mode is untouched; bad
probabilities are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sparsetir.data.node_classification import load_node_classification
from sparsetir.nn import GraphSAGE, NeighborSampler, SAGEConv, as_adjacency
from sparsetir.nn.dropout import draw_keep

pyg = pytest.importorskip("torch_geometric.nn")

CORA = load_node_classification("cora")
ADJ_T = CORA.adjacency
X = torch.from_numpy(CORA.features.toarray())[:, :48].contiguous()
ROWS = np.repeat(np.arange(ADJ_T.shape[0]), np.diff(ADJ_T.indptr))
EDGE_INDEX = torch.from_numpy(np.stack([ADJ_T.indices, ROWS]).astype(np.int64))
P = 0.5


def _models(layers=3):
    torch.manual_seed(0)
    ours = GraphSAGE(48, 16, layers, 7, dropout=P, dropout_in_aggregation=True)
    widths = [48] + [16] * (layers - 1) + [7]
    theirs = [pyg.SAGEConv(w_in, w_out) for w_in, w_out in zip(widths[:-1], widths[1:])]
    for i, conv in enumerate(theirs):
        conv.load_state_dict({k.split(".", 2)[2]: v for k, v in ours.state_dict().items()
                              if k.startswith(f"convs.{i}.")})
    return ours, theirs


def _pyg_forward(theirs, x, edges, targets, seed):
    """PyG's layers with F.dropout's formula, each mask drawn as the fused model draws it."""
    torch.manual_seed(seed)
    for i, conv in enumerate(theirs):
        x = conv((x, x[:targets[i]]), edges[i], size=(x.shape[0], targets[i]))
        if i < len(theirs) - 1:
            x = x.relu()
            keep = draw_keep(x, P)
            x = x * keep / (1 - P)
    return x


def _check_gradients(ours, theirs, out_ours, out_theirs):
    torch.testing.assert_close(out_ours, out_theirs, rtol=1e-4, atol=1e-5)
    grad = torch.randn_like(out_theirs)
    out_ours.backward(grad)
    out_theirs.backward(grad)
    mine = dict(ours.named_parameters())
    for i, conv in enumerate(theirs):
        for name, param in conv.named_parameters():
            torch.testing.assert_close(mine[f"convs.{i}.{name}"].grad, param.grad, rtol=1e-4, atol=1e-4,
                                       msg=f"convs.{i}.{name}")


def test_full_graph_training_equals_pyg_with_the_same_masks():
    ours, theirs = _models()
    ours.train()
    n = X.shape[0]
    torch.manual_seed(1)
    out_ours = ours(X, EDGE_INDEX)
    out_theirs = _pyg_forward(theirs, X, [EDGE_INDEX] * 3, [n] * 3, seed=1)
    _check_gradients(ours, theirs, out_ours, out_theirs)


def test_sampled_blocks_training_equals_pyg_with_the_same_masks():
    batch = NeighborSampler(ADJ_T, (4, 4, 4), seed=0).sample(np.arange(0, 2708, 9), np.random.default_rng(0))
    ours, theirs = _models()
    ours.train()
    x = X.index_select(0, torch.from_numpy(batch.n_id))
    edges, targets = [], []
    for block in batch.blocks:  # adj_t rows are targets: PyG's edge list is (source, target)
        rows = np.repeat(np.arange(block.num_rows), np.diff(block.indptr.numpy()))
        edges.append(torch.from_numpy(np.stack([block.indices.numpy(), rows]).astype(np.int64)))
        targets.append(block.num_rows)
    torch.manual_seed(2)
    out_ours = ours(x, batch.blocks)
    out_theirs = _pyg_forward(theirs, x, edges, targets, seed=2)
    _check_gradients(ours, theirs, out_ours, out_theirs)


def test_eval_mode_and_zero_dropout_are_untouched():
    ours, _ = _models(2)
    plain = GraphSAGE(48, 16, 2, 7, dropout=P)
    plain.load_state_dict(ours.state_dict())
    ours.eval()
    plain.eval()
    torch.testing.assert_close(ours(X, EDGE_INDEX), plain(X, EDGE_INDEX), rtol=0, atol=0)
    none = GraphSAGE(48, 16, 2, 7, dropout=0.0, dropout_in_aggregation=True)
    none.load_state_dict(ours.state_dict())
    none.train()
    torch.testing.assert_close(none(X, EDGE_INDEX), plain(X, EDGE_INDEX), rtol=0, atol=0)


def test_a_layer_that_cannot_fuse_drops_its_input_first_under_one_mask():
    conv = SAGEConv(48, 8, aggr="max")
    assert not conv.fuses_dropout(X) and SAGEConv(48, 8).fuses_dropout(X)
    adj = as_adjacency(EDGE_INDEX, X.shape[0])
    torch.manual_seed(3)
    out = conv.propagate(X, X, adj, dropout=0.3)
    torch.manual_seed(3)
    dropped = F.dropout(X, 0.3)  # the root term sees the sources' mask
    torch.testing.assert_close(out, conv.propagate(dropped, dropped, adj), rtol=0, atol=0)


@pytest.mark.parametrize("p", [1.0, -0.1, float("nan"), True])
def test_bad_probabilities_are_refused(p):
    adj = as_adjacency(EDGE_INDEX, X.shape[0])
    with pytest.raises(ValueError, match="dropout probability"):
        SAGEConv(48, 8).propagate(X, X, adj, dropout=p)
    if p is not True and p != 1.0:
        with pytest.raises(ValueError, match="dropout probability"):
            GraphSAGE(48, 16, 2, 7, dropout=p, dropout_in_aggregation=True)
