"""Every block layout type is validated before anything densifies it (issue 27, item 1): numpy, dense and
sparse torch, scipy csr/csc/coo/bsr, shared and per head; a block index out of range or negative, a
broken indptr, a bad dtype, NaN, an empty or a wrong number of dimensions is a ValueError/TypeError
naming the field; the canonical form (sorted, duplicates summed) is what the kernel and runtime.load
of its export use."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.ops import compile_sparse_attention, prepare_structure, sparse_attention
from sparsetir.runtime import load
from sparsetir.runtime.block_layout import check_block_layout


def _csr(indices, indptr, shape=(2, 2)):
    """A csr_matrix holding exactly these arrays (scipy checks few of them at construction)."""
    matrix = sp.csr_matrix(shape)
    matrix.indices, matrix.indptr = np.asarray(indices, np.int32), np.asarray(indptr, np.int32)
    matrix.data = np.ones(len(indices))
    return matrix


def test_a_scipy_block_column_out_of_range_is_a_value_error_not_a_heap_overwrite():
    # on the old code toarray() wrote past its array (a SIGSEGV in 1 of 2 runs): run it in its own process
    code = ("import numpy as np, scipy.sparse as sp\n"
            "from sparsetir.ops import prepare_structure\n"
            "lay = sp.csr_matrix((np.ones(2), np.array([0, 5]), np.array([0, 1, 2])), shape=(2, 2))\n"
            "try:\n    prepare_structure(lay, 16, 'bsr')\n"
            "except ValueError as e:\n    print('ValueError', e)\n")
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]  # three processes at once (each spends seconds importing the compiler)
    for run in runs:
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-2000:]
        assert "ValueError layout.indices has block index 5" in stdout


@pytest.mark.parametrize(("layout", "match"), [
    (_csr([0, -1], [0, 1, 2]), "block index -1"),
    (_csr([0, 1], [0, 2, 1]), "indptr must start at 0 and never decrease"),
    (_csr([0, 1], [1, 1, 2]), "indptr must start at 0"),
    (_csr([0, 1], [0, 1]), "indptr must have 3 entries"),
    (_csr([0], [0, 1, 2]), "indptr ends at 2"),
    (sp.csc_matrix((np.ones(2), np.array([0, 3]), np.array([0, 1, 2])), shape=(2, 2)), "block index 3"),
    (sp.bsr_matrix((np.ones((1, 1, 1)), np.array([4]), np.array([0, 1, 1])), shape=(2, 2)), "block index 4"),
    (np.ones((2, 2, 2, 2), bool), "heads, rows, cols"),
    (np.ones(4, bool), "heads, rows, cols"),
    (np.ones((0, 2), bool), "empty dimension"),
    (np.array([[1.0, np.nan], [0.0, 1.0]]), "NaN or infinite"),
    (sp.csr_matrix(np.array([[1.0, np.inf], [0.0, 1.0]])), "NaN or infinite"),
    (torch.ones(2, 2, 2, 2), "heads, rows, cols"),
])
def test_a_broken_layout_is_a_value_error_naming_the_field(layout, match):
    with pytest.raises(ValueError, match=match):
        check_block_layout(layout)


@pytest.mark.parametrize("layout", [
    np.array([["a", "b"], ["c", "d"]]), np.ones((2, 2), complex), torch.ones(2, 2, dtype=torch.complex64),
    [[True, False], [False, True]], sp.csr_matrix(np.ones((2, 2), complex)),
])
def test_a_layout_of_the_wrong_type_or_dtype_is_a_type_error(layout):
    with pytest.raises(TypeError, match="layout"):
        check_block_layout(layout)


def test_torch_sparse_layouts_are_checked_through_their_structure():
    bad = torch.sparse_coo_tensor(torch.tensor([[0, 1], [0, 7]]), torch.ones(2), (2, 2), check_invariants=False)
    with pytest.raises(ValueError, match="col has block index 7"):
        check_block_layout(bad)
    good = torch.tensor([[True, False], [True, True]])
    for sparse in (good.float().to_sparse(), good.float().to_sparse_csr()):
        assert np.array_equal(check_block_layout(sparse), good.numpy())
    assert np.array_equal(check_block_layout(good.to(torch.bfloat16)), good.numpy())


def test_unsorted_duplicate_scipy_entries_canonicalise_to_the_dense_layout():
    coo = sp.coo_matrix((np.array([1.0, 1.0, 2.0, -2.0]), (np.array([1, 0, 1, 1]), np.array([0, 1, 1, 1]))),
                        shape=(2, 2))  # (1, 1) sums to 0: not kept
    expected = np.array([[False, True], [True, False]])
    assert np.array_equal(check_block_layout(coo), expected)
    unsorted = sp.csr_matrix((np.ones(3), np.array([1, 0, 0]), np.array([0, 2, 3])), shape=(2, 2))
    assert not unsorted.has_sorted_indices
    assert np.array_equal(check_block_layout(unsorted), np.array([[True, True], [True, False]]))


def test_per_head_layouts_of_every_type_give_one_structure():
    layout = np.stack([np.eye(2, dtype=bool), np.ones((2, 2), bool)])
    expected = prepare_structure(layout, 16, "bsr").bound
    for other in (layout.astype(np.int8), torch.from_numpy(layout), torch.from_numpy(layout.astype(np.float32))):
        got = prepare_structure(other, 16, "bsr").bound
        assert sorted(got) == sorted(expected) and all(np.array_equal(got[n], expected[n]) for n in expected)


def test_a_negative_block_column_no_longer_gives_a_silent_result():
    q = torch.randn(1, 1, 32, 8)
    with pytest.raises(ValueError, match="block index -1"):
        sparse_attention(q, q, q, _csr([0, -1], [0, 1, 2]), block=16)


def test_an_export_keeps_its_layout_and_load_checks_it_with_the_same_validator(tmp_path):
    layout = np.array([[True, False], [True, True]])
    kernel = compile_sparse_attention(layout, 8, block=16)
    path = kernel.export(tmp_path / "attention.so")
    loaded = load(path)
    assert np.array_equal(loaded.layout, layout)
    q = torch.randn(1, 2, 32, 8)
    assert torch.equal(loaded(q, q, q), kernel(q, q, q))
