"""A compiled kernel owns its structure (editing A afterwards changes nothing, item 3); an output
that overlaps an input is refused (item 4); a torch input that requires grad gets its gradient
through the ops, or a TypeError where a call is not recorded by autograd, never a silently
detached result (item 5); exports load from any working directory and
sddmm's result owns its structure (items 10 and 11)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import sparsetir.runtime as runtime
from sparsetir.ops import compile_spmm, sddmm, spmm

A = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=0)
A.sort_indices()


@pytest.mark.parametrize("fmt", ["csr", "hyb", "ell", "rcsr:3"])
def test_editing_A_after_compiling_changes_nothing(fmt):
    mine = A.copy()
    kernel = compile_spmm(mine, 8, format=fmt)
    B = np.ones((30, 8), np.float32)
    before = kernel(B).copy()
    mine.indices[:] = 10**6  # would crash a kernel that kept the caller's arrays
    mine.indptr[1] = mine.indptr[-1] + 100
    mine.data[:] = 99.0
    np.testing.assert_array_equal(kernel(B), before)


@pytest.mark.parametrize("fmt", ["csr", "hyb", "bsr:4"])
def test_an_output_overlapping_an_input_is_refused(fmt):
    square = sp.random(30, 30, density=0.2, format="csr", dtype=np.float32, random_state=1)
    B = np.ones((30, 8), np.float32)
    with pytest.raises(ValueError, match="out shares memory with B"):
        spmm(square, B, out=B, format=fmt)
    with pytest.raises(ValueError, match="out shares memory with B"):
        compile_spmm(square, 8, format=fmt)(B, out=B[:, :])
    Bt = torch.ones(30, 8)
    with pytest.raises(ValueError, match="out shares memory with B"):
        spmm(square, Bt, out=Bt, format=fmt)
    with pytest.raises(ValueError, match="out shares memory with B"):  # torch and numpy views of one buffer
        compile_spmm(square, 8, format=fmt)(Bt, out=torch.from_numpy(Bt.numpy()))


def test_a_partly_overlapping_view_is_refused_and_a_separate_output_is_fine():
    square = sp.random(30, 30, density=0.2, format="csr", dtype=np.float32, random_state=1)
    storage = np.ones((60, 8), np.float32)
    with pytest.raises(ValueError, match="shares memory"):
        spmm(square, storage[:30], out=storage[20:50])
    out = np.empty((30, 8), np.float32)
    np.testing.assert_allclose(spmm(square, storage[:30], out=out), square @ storage[:30], rtol=1e-5)


def test_inputs_that_require_grad_get_gradients_through_the_ops_and_a_type_error_elsewhere():
    B = torch.ones(30, 8, requires_grad=True)  # ops.spmm/sddmm go through torch.ops.sparsetir (issue 17)
    spmm(A, B).sum().backward()
    np.testing.assert_allclose(B.grad.numpy(), A.T @ np.ones((40, 8), np.float32), rtol=1e-5)
    X = torch.ones(40, 4, requires_grad=True)
    sddmm(A, X, torch.ones(30, 4)).values().sum().backward()
    assert X.grad is not None
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)), torch.from_numpy(A.indices.astype(np.int64)),
                                 torch.from_numpy(A.data), size=A.shape).requires_grad_(True)
    spmm(At, torch.ones(30, 8)).sum().backward()
    assert At.grad is not None
    with pytest.raises(TypeError, match="requires grad"):  # a direct kernel call is not recorded by autograd
        compile_spmm(A, 8)(torch.ones(30, 8, requires_grad=True))
    with pytest.raises(TypeError, match="requires grad"):  # out= is written in place: not differentiable
        spmm(A, torch.ones(30, 8), out=torch.zeros(40, 8, requires_grad=True))
    with pytest.raises(TypeError, match="requires grad"):
        spmm(A, torch.ones(30, 8, requires_grad=True), out=torch.zeros(40, 8))
    with pytest.raises(TypeError, match="A's values require grad"):  # a numpy B gives a numpy result
        spmm(At, np.ones((30, 8), np.float32))
    with torch.no_grad():  # outside autograd, nothing is lost: it runs
        assert spmm(A, B).shape == (40, 8)


def test_an_export_loads_and_runs_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    compile_spmm(A, 8).export("spmm.so")  # relative, as the README writes it
    kernel = runtime.load("spmm.so")
    os.chdir("/")
    B = np.ones((30, 8), np.float32)
    np.testing.assert_allclose(kernel(B), A @ B, rtol=1e-5)


def test_sddmm_results_own_their_structure():
    X, Y = np.ones((40, 4), np.float32), np.ones((30, 4), np.float32)
    result = sddmm(A, X, Y)
    assert not np.shares_memory(result.indices, A.indices) and not np.shares_memory(result.indptr, A.indptr)


def test_a_block_larger_than_the_matrix_says_so():
    small = sp.random(20, 16, density=0.3, format="csr", dtype=np.float32, random_state=2)
    with pytest.raises(ValueError, match="larger than the 20 x 16 matrix"):
        spmm(small, np.ones((16, 4), np.float32), format="bsr:100000")
