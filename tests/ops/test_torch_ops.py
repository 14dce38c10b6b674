"""torch.ops.sparsetir.spmm / sddmm / edge_index_to_csr: registered with fake kernels, autograd and
autocast; correct gradients in float64; sparsetir.ops.spmm/sddmm with torch inputs go through them,
so no input that requires grad is ever silently detached."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import sparsetir.ops  # noqa: F401 - registers torch.ops.sparsetir.*
from sparsetir.ops import compile_spmm, sddmm, spmm, torch_ops

pytestmark = [pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state"),
              pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")]

A = sp.random(30, 20, density=0.2, format="csr", dtype=np.float64, random_state=0)
A.sort_indices()


def structure(matrix=A):
    return (torch.from_numpy(matrix.indptr.astype(np.int64)), torch.from_numpy(matrix.indices.astype(np.int64)),
            torch.from_numpy(matrix.data.copy()))


def unsorted_with_duplicates():
    """Rows with columns out of order and repeated (3 x 4): the ops keep every stored entry."""
    return torch.tensor([0, 3, 4, 6]), torch.tensor([2, 0, 2, 1, 3, 3]), torch.tensor([1.0, 2, 3, 4, 5, 6],
                                                                                      dtype=torch.float64)


def dense(indptr, indices, values, cols):
    out = torch.zeros(indptr.shape[0] - 1, cols, dtype=values.dtype)
    rows = torch.repeat_interleave(torch.arange(indptr.shape[0] - 1), indptr[1:] - indptr[:-1])
    return out.index_put((rows, indices), values, accumulate=True)


def _opcheck_cases():
    indptr, indices, values = structure()
    B, Bt = torch.randn(20, 5, dtype=torch.float64), torch.randn(30, 5, dtype=torch.float64)
    X, Y = torch.randn(30, 4, dtype=torch.float64), torch.randn(20, 4, dtype=torch.float64)
    edge_index = torch.stack([indices, torch.repeat_interleave(torch.arange(30), indptr[1:] - indptr[:-1])])
    grad = values.clone().requires_grad_()
    return {"spmm": (torch.ops.sparsetir.spmm.default, (indptr, indices, grad, B.requires_grad_(), 20)),
            "spmm-transpose_a": (torch.ops.sparsetir.spmm.default, (indptr, indices, grad, Bt.requires_grad_(), 20,
                                                                    True)),
            "sddmm": (torch.ops.sparsetir.sddmm.default, (indptr, indices, grad, X.requires_grad_(),
                                                          Y.requires_grad_())),
            "edge_index_to_csr": (torch.ops.sparsetir.edge_index_to_csr.default, (edge_index, 30))}


@pytest.mark.slow  # opcheck traces through AOT autograd: about 6 s for the four
@pytest.mark.parametrize("case", ["spmm", "spmm-transpose_a", "sddmm", "edge_index_to_csr"])
def test_opcheck_passes_for_every_registered_op(case):
    op, args = _opcheck_cases()[case]
    results = torch.library.opcheck(op, args)  # schema, fake kernel, autograd registration, AOT dispatch
    assert set(results.values()) == {"SUCCESS"}, results


def test_the_fake_kernels_give_the_output_shapes_without_running_anything():
    meta = {"device": "meta"}
    indptr, indices = torch.empty(31, dtype=torch.int64, **meta), torch.empty(120, dtype=torch.int64, **meta)
    values = torch.empty(120, **meta)
    assert torch.ops.sparsetir.spmm(indptr, indices, values, torch.empty(20, 5, **meta), 20).shape == (30, 5)
    assert torch.ops.sparsetir.spmm(indptr, indices, values, torch.empty(30, 5, **meta), 20, True).shape == (20, 5)
    out = torch.ops.sparsetir.sddmm(indptr, indices, values, torch.empty(30, 4, **meta), torch.empty(20, 4, **meta))
    assert out.shape == (120,) and out.device.type == "meta"
    ptr, idx, perm = torch.ops.sparsetir.edge_index_to_csr(torch.empty(2, 50, dtype=torch.int64, **meta), 7)
    assert (ptr.shape, idx.shape, perm.shape) == ((8,), (50,), (50,))
    with pytest.raises(ValueError, match="B has 19 rows, expected 20"):
        torch.ops.sparsetir.spmm(indptr, indices, values, torch.empty(19, 5, **meta), 20)


@pytest.mark.parametrize("transpose_a", [False, True])
def test_spmm_gradients_in_float64(transpose_a):
    indptr, indices, values = structure()
    B = torch.randn(30 if transpose_a else 20, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v, b: torch.ops.sparsetir.spmm(indptr, indices, v, b, 20, transpose_a),
                                    (values.requires_grad_(), B))


def test_sddmm_gradients_in_float64():
    indptr, indices, values = structure()
    X = torch.randn(30, 4, dtype=torch.float64, requires_grad=True)
    Y = torch.randn(20, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v, x, y: torch.ops.sparsetir.sddmm(indptr, indices, v, x, y),
                                    (values.requires_grad_(), X, Y))


def test_second_derivatives_go_through_the_same_ops():
    indptr, indices, values = structure()
    B = torch.randn(20, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda v, b: torch.ops.sparsetir.spmm(indptr, indices, v, b, 20),
                                        (values.requires_grad_(), B))


def test_unsorted_rows_and_duplicates_keep_one_value_and_one_gradient_per_stored_entry():
    indptr, indices, values = unsorted_with_duplicates()
    X, Y = torch.randn(3, 2, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)
    rows = torch.repeat_interleave(torch.arange(3), indptr[1:] - indptr[:-1])
    torch.testing.assert_close(torch.ops.sparsetir.sddmm(indptr, indices, values, X, Y),
                               values * (X[rows] * Y[indices]).sum(1))
    B = torch.randn(4, 2, dtype=torch.float64)
    torch.testing.assert_close(torch.ops.sparsetir.spmm(indptr, indices, values, B, 4), dense(indptr, indices, values, 4) @ B)
    assert torch.autograd.gradcheck(lambda v, x, y: torch.ops.sparsetir.sddmm(indptr, indices, v, x, y),
                                    (values.clone().requires_grad_(), X.requires_grad_(), Y.requires_grad_()))


def test_another_format_gives_the_same_values_and_gradients_as_csr():
    indptr, indices, values = structure(A.astype(np.float32))
    B = torch.randn(20, 8, requires_grad=True)
    results = []
    for fmt in ("csr", "hyb", "ell:2"):
        B.grad = None
        out = torch.ops.sparsetir.spmm(indptr, indices, values, B, 20, False, fmt)
        out.square().sum().backward()
        results.append((out.detach(), B.grad.clone()))
    for out, grad in results[1:]:
        torch.testing.assert_close(out, results[0][0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grad, results[0][1], rtol=1e-5, atol=1e-5)


def test_ops_spmm_and_sddmm_with_torch_inputs_are_differentiable_everywhere():
    dense_A = torch.from_numpy(A.toarray()).requires_grad_()
    At = torch.from_numpy(A.toarray()).to_sparse_csr().requires_grad_()
    B = torch.randn(20, 4, dtype=torch.float64, requires_grad=True)
    B_ref = B.detach().clone().requires_grad_()
    weight = torch.randn(30, 4, dtype=torch.float64)
    (spmm(At, B) * weight).sum().backward()
    (dense_A @ B_ref * weight).sum().backward()
    torch.testing.assert_close(B.grad, B_ref.grad)
    torch.testing.assert_close(At.grad.to_dense(), dense_A.grad * (dense_A != 0))
    X = torch.randn(30, 3, dtype=torch.float64, requires_grad=True)
    Y = torch.randn(20, 3, dtype=torch.float64, requires_grad=True)
    result = sddmm(A, X, Y)
    assert result.layout == torch.sparse_csr
    result.values().sum().backward()
    mask = torch.from_numpy(A.toarray())
    torch.testing.assert_close(X.grad, mask @ Y.detach())
    torch.testing.assert_close(Y.grad, mask.T @ X.detach())


def test_a_coo_A_with_duplicates_gets_its_gradient():
    indices = torch.tensor([[0, 0, 1, 0], [1, 1, 0, 2]])
    A_coo = torch.sparse_coo_tensor(indices, torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64), (2, 3))
    A_coo.requires_grad_()
    B = torch.randn(3, 2, dtype=torch.float64)
    spmm(A_coo, B).sum().backward()
    torch.testing.assert_close(A_coo.grad.to_dense(), (B.sum(1)[None, :] * (A_coo.detach().to_dense() != 0)))


def test_no_input_that_requires_grad_is_silently_detached():
    """Each torch input that requires grad either gets a correct gradient or a TypeError that says why."""
    B = torch.ones(20, 4, requires_grad=True)
    out = spmm(A.astype(np.float32), B)
    assert out.grad_fn is not None
    with pytest.raises(TypeError, match="requires grad"):
        compile_spmm(A.astype(np.float32), 4)(B)  # a kernel call is not recorded by autograd
    with pytest.raises(TypeError, match="requires grad"):
        spmm(A.astype(np.float32), B, out=torch.empty(30, 4))  # out= writes in place
    At = torch.from_numpy(A.toarray().astype(np.float32)).to_sparse_csr().requires_grad_()
    with pytest.raises(TypeError, match="require grad"):
        spmm(At, np.ones((20, 4), np.float32))  # a numpy B gives a numpy result: no graph to record into


def test_autocast_runs_in_bfloat16_with_float32_accumulation_and_keeps_gradients():
    indptr, indices, values = structure(A.astype(np.float32))
    B = torch.randn(20, 16, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = torch.ops.sparsetir.spmm(indptr, indices, values, B, 20)
        scores = torch.ops.sparsetir.sddmm(indptr, indices, values, torch.randn(30, 16), torch.randn(20, 16))
    assert out.dtype == torch.bfloat16 and scores.dtype == torch.bfloat16
    reference = torch.from_numpy(A.astype(np.float32).toarray()) @ B.detach()
    torch.testing.assert_close(out.float(), reference, rtol=2e-2, atol=2e-2)
    out.float().sum().backward()
    assert B.grad is not None and B.grad.dtype == torch.float32


def test_a_structure_is_validated_once_then_found_by_identity_and_by_content():
    indptr, indices, values = structure()
    B = torch.randn(20, 3, dtype=torch.float64)
    torch.ops.sparsetir.spmm(indptr, indices, values, B, 20)
    before = torch_ops.stats()
    torch.ops.sparsetir.spmm(indptr, indices, values, B, 20)  # the same tensors
    torch.ops.sparsetir.spmm(indptr.clone(), indices.clone(), values, B, 20)  # equal content
    after = torch_ops.stats()
    assert after["misses"] == before["misses"] and after["hits"] == before["hits"] + 2


def test_editing_the_index_tensors_in_place_is_seen():
    indptr, indices, values = structure()
    B = torch.randn(20, 3, dtype=torch.float64)
    torch.ops.sparsetir.spmm(indptr, indices, values, B, 20)
    indices[:] = torch.flip(indices, [0])  # an in-place edit bumps the version counter
    torch.testing.assert_close(torch.ops.sparsetir.spmm(indptr, indices, values, B, 20),
                               dense(indptr, indices, values, 20) @ B)


def test_new_values_on_a_cached_transposed_structure_are_used():
    indptr, indices, values = structure()
    dC = torch.randn(30, 3, dtype=torch.float64)
    for scale in (1.0, 2.0):
        scaled = values * scale
        torch.testing.assert_close(torch.ops.sparsetir.spmm(indptr, indices, scaled, dC, 20, True),
                                   dense(indptr, indices, scaled, 20).T @ dC)


@pytest.mark.parametrize("change,error,message", [
    (lambda a: {**a, "B": torch.randn(19, 3, dtype=torch.float64)}, ValueError, "B has 19 rows, expected 20"),
    (lambda a: {**a, "indices": a["indices"].double()}, TypeError, "indices must have an integer dtype"),
    (lambda a: {**a, "values": a["values"][:-1]}, ValueError, "values must be 1-D with one entry per index"),
    (lambda a: {**a, "num_cols": 5, "B": torch.randn(5, 3, dtype=torch.float64)}, ValueError,
     "indices has index .* out of range for length 5"),
    (lambda a: {**a, "B": torch.ones(20, 3, dtype=torch.int64)}, TypeError, "B has dtype torch.int64"),
])
def test_bad_input_is_refused_before_any_kernel_runs(change, error, message):
    indptr, indices, values = structure()
    args = change({"indptr": indptr, "indices": indices, "values": values, "B": torch.randn(20, 3, dtype=torch.float64),
                   "num_cols": 20})
    with pytest.raises(error, match=message):
        torch.ops.sparsetir.spmm(args["indptr"], args["indices"], args["values"], args["B"], args["num_cols"])


def test_edge_index_to_csr_sorts_stably_by_target_and_checks_ids():
    edge_index = torch.tensor([[3, 0, 1, 2, 0], [1, 2, 1, 0, 1]])  # sources, targets
    indptr, indices, perm = torch.ops.sparsetir.edge_index_to_csr(edge_index, 3)
    assert indptr.tolist() == [0, 1, 4, 5] and indices.tolist() == [2, 3, 1, 0, 0] and perm.tolist() == [3, 0, 2, 4, 1]
    with pytest.raises(ValueError, match=r"edge_index\[1, 1\] = 2 is not a node id below num_rows=2"):
        torch.ops.sparsetir.edge_index_to_csr(edge_index, 2)


@pytest.mark.slow  # torch.compile: about 5 to 10 s
def test_torch_compile_fullgraph_traces_the_ops_without_graph_breaks():
    indptr, indices, values = structure(A.astype(np.float32))
    edge_index = torch.stack([indices, torch.repeat_interleave(torch.arange(30), indptr[1:] - indptr[:-1])])
    weight = torch.randn(20, 6, requires_grad=True)

    def layer(x, edge_index):
        ptr, idx, _perm = torch.ops.sparsetir.edge_index_to_csr(edge_index, 30)
        ones = torch.ones(idx.shape[0], dtype=x.dtype)
        return torch.ops.sparsetir.spmm(ptr, idx, ones, x @ weight, x.shape[0]).relu().sum()

    x = torch.randn(20, 20)
    compiled = torch.compile(layer, fullgraph=True)  # a graph break would raise
    eager = layer(x, edge_index)
    result = compiled(x, edge_index)
    torch.testing.assert_close(result, eager, rtol=1e-5, atol=1e-5)
    result.backward()
    assert weight.grad is not None and weight.grad.abs().sum() > 0
