"""GraphSAGE trains: under torch.compile(fullgraph=True) with an edge_index (no graph break, the same
losses as eager), on sampled mini-batches (fresh structures each step), and under autocast."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sparsetir.data.node_classification import load_node_classification
from sparsetir.nn import GraphSAGE, NeighborSampler

CORA = load_node_classification("cora")
ADJ_T = CORA.adjacency
X = torch.from_numpy(CORA.features[:, :32].toarray())  # 32 features keep the dense work small
Y = torch.from_numpy(CORA.labels)
EDGE_INDEX = torch.from_numpy(np.stack([ADJ_T.indices, np.repeat(np.arange(ADJ_T.shape[0]),
                                                                  np.diff(ADJ_T.indptr))]).astype(np.int64))


def _losses(model, steps, forward):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(forward(model), Y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.slow  # dynamo and AOT autograd trace the forward and backward graphs: about 5 s
def test_a_tiny_training_loop_under_torch_compile_fullgraph():
    """AOT autograd without inductor's C++ code generation (tests/ops/test_torch_ops.py compiles one
    layer with inductor): the whole model is one graph, the fake kernels and autograd formulas traced."""
    torch.manual_seed(0)
    eager = GraphSAGE(32, 16, 2, 7)
    compiled_model = GraphSAGE(32, 16, 2, 7)
    compiled_model.load_state_dict(eager.state_dict())
    compiled = torch.compile(compiled_model, fullgraph=True, backend="aot_eager")  # a graph break raises
    expected = _losses(eager, 4, lambda model: model(X, EDGE_INDEX))
    found = _losses(compiled, 4, lambda model: model(X, EDGE_INDEX))
    np.testing.assert_allclose(found, expected, rtol=1e-4, atol=1e-5)
    assert found[-1] < found[0]


def test_mini_batch_training_on_fresh_structures_lowers_the_loss():
    torch.manual_seed(0)
    model = GraphSAGE(32, 16, 2, 7)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    sampler = NeighborSampler(ADJ_T, [5, 5], seed=0)
    first = last = None
    for epoch in range(3):
        for batch in sampler.batches(np.arange(1024), 512, epoch=epoch):
            optimizer.zero_grad()
            out = model(X[torch.from_numpy(batch.n_id)], batch.blocks)
            loss = F.cross_entropy(out, Y[torch.from_numpy(batch.seeds)])
            loss.backward()
            optimizer.step()
            first = loss.item() if first is None else first
            last = loss.item()
    assert last < first


def test_training_under_autocast_bfloat16():
    torch.manual_seed(0)
    model = GraphSAGE(32, 16, 2, 7)

    def forward(model):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(X, EDGE_INDEX).float()

    losses = _losses(model, 3, forward)
    assert losses[-1] < losses[0] and all(np.isfinite(losses))
