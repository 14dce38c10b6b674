"""bench.epoch_split: an epoch's time split into sparse ops, dense products and the rest from the
profiler's operator tree; a fused op is looked into; DGL's kernels are labelled while profiled."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sparsetir.bench.epoch_split import classify, epoch_split, labelled_library_kernels, profile_epoch


def _event(name, total_us, children=()):
    event = SimpleNamespace(name=name, cpu_time_total=total_us, cpu_children=list(children), cpu_parent=None)
    for child in children:
        child.cpu_parent = event
    return event


def test_the_tree_is_split_from_the_top_and_a_fused_op_is_looked_into():
    assert classify("sparsetir::spmm_row_scaled") == "sparse" and classify("aten::addmm") == "dense"
    assert classify("aten::linear") is None and classify("sparsetir::aggregate_transform") is None
    spmm, gemm = _event("sparsetir::spmm_row_scaled", 200), _event("aten::addmm", 300)
    fused = _event("sparsetir::aggregate_transform", 600, [spmm, gemm])
    inner = _event("aten::empty", 5)
    linear = _event("aten::linear", 150, [_event("aten::addmm", 140, [inner])])  # dense counted once, with its child
    events = [fused, spmm, gemm, linear, linear.cpu_children[0], inner, _event("aten::dropout", 100)]
    split = epoch_split(events, wall_s=1e-3)
    assert split["sparse"] == pytest.approx(0.2) and split["dense"] == pytest.approx(0.44)
    assert split["rest"] == pytest.approx(0.36) and split["profiled_ms"] == pytest.approx(1.0)


def test_a_profiled_sparsetir_step_has_its_spmm_in_sparse_and_its_gemm_in_dense():
    from sparsetir.nn import SAGEConv

    rows = np.repeat(np.arange(64), 4)
    edges = torch.from_numpy(np.stack([np.random.default_rng(0).integers(0, 64, rows.size), rows]))
    conv, x = SAGEConv(32, 16), torch.randn(64, 32)
    conv(x, edges).sum().backward()  # compiled and converted before the profile

    split = profile_epoch(lambda: conv(x, edges).sum().backward())
    assert split["sparse"] > 0 and split["dense"] > 0
    assert split["sparse"] + split["dense"] + split["rest"] == pytest.approx(1.0, abs=1e-3)


def test_dgl_kernels_are_labelled_only_while_profiled():
    from baselines.dgl import import_dgl

    dgl, reason = import_dgl()
    if dgl is None:
        pytest.skip(reason)
    module = sys.modules["dgl.backend.pytorch.sparse"]
    before = module._gspmm
    with labelled_library_kernels():
        assert module._gspmm is not before
    assert module._gspmm is before
