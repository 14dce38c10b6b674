"""A prepared kernel's short call path (runtime.call_plan): it takes only operands the full path would pass
unchanged, and every other call goes the full path (which converts or refuses as before)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.ops import compile_spmm
from sparsetir.runtime.call_plan import CallPlan

A = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=2)
FEAT = 8


@pytest.fixture(scope="module")
def kernel():
    return compile_spmm(A, FEAT)


def full_path_refused(kernel, monkeypatch):
    """Make the full path's invoke fail loudly, so a call that still works went the short path."""
    def refuse(*args, **kwargs):
        raise AssertionError("the full path ran")

    monkeypatch.setattr(kernel.function, "invoke", refuse)


@pytest.mark.parametrize("make", [lambda B: B, torch.from_numpy], ids=["numpy", "torch"])
def test_ready_operands_take_the_short_path_with_the_full_paths_result(kernel, monkeypatch, make):
    B = np.random.default_rng(0).standard_normal((30, FEAT), dtype=np.float32)
    expected = A @ B
    full_path_refused(kernel, monkeypatch)
    np.testing.assert_allclose(np.asarray(kernel(make(B))), expected, rtol=1e-5, atol=1e-5)
    out = make(np.full((40, FEAT), np.nan, np.float32))
    assert kernel(make(B), out=out) is out
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)
    assert isinstance(kernel._plan, CallPlan)


def test_operands_that_need_converting_go_the_full_path_and_get_the_same_result(kernel, monkeypatch):
    B = np.random.default_rng(1).standard_normal((30, FEAT), dtype=np.float32)
    calls = []
    invoke = kernel.function.invoke
    monkeypatch.setattr(kernel.function, "invoke", lambda *a, **k: (calls.append(1), invoke(*a, **k)))
    strided = np.asfortranarray(B)  # not C-contiguous: copied by the full path
    misaligned = np.frombuffer(np.zeros(B.nbytes + 4, np.uint8).data, np.uint8)[4:].view(np.float32).reshape(B.shape)
    misaligned[...] = B
    for operand in (strided, misaligned, torch.from_numpy(B).T.contiguous().T):
        np.testing.assert_allclose(np.asarray(kernel(operand)), A @ B, rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # a tensor that requires grad, where autograd is off: the full path allows it
        np.testing.assert_allclose(kernel(torch.from_numpy(B).requires_grad_()).numpy(), A @ B, rtol=1e-5,
                                   atol=1e-5)
    assert len(calls) == 4


def test_bad_operands_are_still_refused_before_the_kernel_runs(kernel):
    B = np.zeros((30, FEAT), np.float32)
    with pytest.raises(TypeError, match="dtype float64"):
        kernel(B.astype(np.float64))
    with pytest.raises(ValueError, match="shape"):
        kernel(np.zeros((31, FEAT), np.float32))
    with pytest.raises(TypeError, match="requires grad"):
        kernel(torch.zeros(30, FEAT, requires_grad=True))
    with pytest.raises(TypeError, match="numpy array or torch tensor"):
        kernel(B.tolist())
    with pytest.raises(TypeError, match="dtype float64"):
        kernel(B, out=np.zeros((40, FEAT)))
    with pytest.raises(TypeError, match="requires grad"):
        kernel(B, out=torch.zeros(40, FEAT, requires_grad=True))
    out = np.zeros((40, FEAT), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        kernel(B, out=out)
    square = compile_spmm(sp.random(30, 30, density=0.2, format="csr", dtype=np.float32, random_state=3), FEAT)
    shared = np.zeros((30, FEAT), np.float32)
    with pytest.raises(ValueError, match="shares memory"):
        square(shared, out=shared)
    with pytest.raises(ValueError, match="shares memory"):
        square(torch.from_numpy(shared), out=torch.from_numpy(shared))


def test_the_plan_accepts_only_what_needs_no_conversion(kernel):
    kernel(np.zeros((30, FEAT), np.float32))
    plan = kernel._plan
    ready = torch.zeros(30, FEAT)
    assert plan.accepts(0, ready) is ready
    for bad in (torch.zeros(30, FEAT, dtype=torch.float64), torch.zeros(31, FEAT), torch.zeros(FEAT, 30).T,
                torch.zeros(30, FEAT, requires_grad=True), torch.zeros(30, FEAT, device="meta"),
                torch.zeros(0, FEAT), torch.nn.Parameter(torch.zeros(30, FEAT), requires_grad=False),
                np.zeros((30, FEAT), np.float64), np.zeros((30, FEAT), np.float32)[::-1], [[0.0] * FEAT] * 30):
        assert plan.accepts(0, bad) is None
    readonly = np.zeros((40, FEAT), np.float32)
    readonly.flags.writeable = False
    assert plan.accepts(1, readonly, output=True) is None
