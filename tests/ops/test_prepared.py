"""A structure seen before reuses its prepared kernel (ops.prepared): the same content in new
objects hits, an edit in place misses and is validated again, and the cache stays bounded."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparsetir.data import masks
from sparsetir.ops import kernel_map, rgms, sddmm, sparse_attention, sparse_conv3d, spmm
from sparsetir.ops.prepared import PREPARED, PreparedKernels, options_key


@pytest.fixture(autouse=True)
def fresh_cache():
    PREPARED.clear()
    yield
    PREPARED.clear()


def graph(seed=0, shape=(40, 30)):
    A = sp.random(*shape, density=0.1, format="csr", dtype=np.float32, random_state=seed)
    A.sum_duplicates()
    return A


def test_spmm_on_an_equal_structure_in_new_arrays_reuses_the_kernel():
    A = graph()
    B = np.random.default_rng(0).standard_normal((30, 8), dtype=np.float32)
    np.testing.assert_allclose(spmm(A, B), A @ B, rtol=1e-5, atol=1e-5)
    copy = sp.csr_matrix((A.data.copy(), A.indices.copy(), A.indptr.copy()), shape=A.shape)
    np.testing.assert_allclose(spmm(copy, B), A @ B, rtol=1e-5, atol=1e-5)
    assert (PREPARED.hits, PREPARED.misses) == (1, 1)


def test_a_structure_edited_in_place_is_prepared_and_validated_again():
    A = graph()
    B = np.random.default_rng(0).standard_normal((30, 8), dtype=np.float32)
    spmm(A, B)
    A.indices[0] = (A.indices[0] + 1) % 30  # a valid edit: a new structure, so a new kernel
    np.testing.assert_allclose(spmm(A, B), A @ B, rtol=1e-5, atol=1e-5)
    assert PREPARED.misses == 2
    A.indices[0] = 99  # out of range for 30 columns: refused before any kernel runs
    with pytest.raises(ValueError, match="out of range"):
        spmm(A, B)


def test_new_values_on_a_known_structure_are_used():
    A = graph()
    B = np.random.default_rng(0).standard_normal((30, 8), dtype=np.float32)
    spmm(A, B)
    A.data *= 3
    np.testing.assert_allclose(spmm(A, B), A @ B, rtol=1e-5, atol=1e-5)


def test_sddmm_rgms_and_conv_reuse_their_kernels():
    rng = np.random.default_rng(1)
    A = graph(1)
    X, Y = rng.standard_normal((40, 4), dtype=np.float32), rng.standard_normal((30, 4), dtype=np.float32)
    expected = (X @ Y.T)[A.nonzero()] * A.data
    for _ in range(2):
        np.testing.assert_allclose(sddmm(A, X, Y).data, expected, rtol=1e-5, atol=1e-5)
    relations = [graph(2, (20, 20)), graph(3, (20, 20))]
    X, W = rng.standard_normal((20, 4), dtype=np.float32), rng.standard_normal((2, 4, 3), dtype=np.float32)
    for _ in range(2):
        np.testing.assert_allclose(rgms(relations, X, W), sum(r @ X @ W[i] for i, r in enumerate(relations)),
                                   rtol=1e-4, atol=1e-4)
    coords = np.array([[0, 0, 0, 0], [0, 0, 0, 1], [0, 1, 1, 1]])
    features, weight = rng.standard_normal((3, 4), dtype=np.float32), rng.standard_normal((27, 4, 2), dtype=np.float32)
    first = sparse_conv3d(features, kernel_map(coords), weight)
    np.testing.assert_allclose(sparse_conv3d(features, kernel_map(coords), weight), first)  # a new, equal map
    assert (PREPARED.hits, PREPARED.misses) == (3, 3)


def test_sparse_attention_called_again_with_one_layout_reuses_its_kernel():
    layout = masks.longformer(64, 16, 16)
    q, k, v = (torch.randn(1, 2, 64, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
    first = sparse_attention(q, k, v, layout)
    second = sparse_attention(q, k, v, layout.copy())
    torch.testing.assert_close(first, second)
    assert (PREPARED.hits, PREPARED.misses) == (1, 1)


def test_the_cache_is_bounded_by_count_and_bytes():
    cache = PreparedKernels(capacity=2, capacity_bytes=1000)
    for i in range(4):
        cache.get(options_key("op"), (np.full(10, i),), lambda i=i: i)
    assert len(cache) == 2
    assert cache.get(options_key("op"), (np.full(10, 3),), lambda: "rebuilt") == 3
    assert cache.get(options_key("op"), (np.zeros(1000),), lambda: "big") == "big"  # too big to keep
    assert len(cache) == 2


def test_fresh_csr_structures_share_one_compiled_function_and_equal_scipy():
    rng = np.random.default_rng(3)
    B = rng.standard_normal((30, 8))
    functions = set()
    for seed, index in ((4, np.int32), (5, np.int64)):
        A = graph(seed).astype(np.float64)
        A.indptr, A.indices = A.indptr.astype(index), A.indices.astype(index)
        A.indices[A.indptr[3]:A.indptr[4]] = A.indices[A.indptr[3]:A.indptr[4]][::-1].copy()  # an unsorted row
        A.data[:3] = [1, 2, 3]
        np.testing.assert_allclose(spmm(A, B), A @ B, rtol=1e-12)
        (kernel,) = [entry[3] for entry in PREPARED._entries.values() if entry[0][0] == "spmm" and
                     entry[2][0].dtype == index]
        functions.add(id(kernel.function))
        assert not kernel._bound["J_indices"].flags.writeable
        assert not np.shares_memory(kernel._bound["J_indices"], A.indices)
    assert len(functions) == 1


def test_a_fresh_csr_structure_runs_once_without_a_kernel_then_binds_one(monkeypatch):
    from sparsetir.ops.spmm import FreshCSR

    A = graph(6)
    rng = np.random.default_rng(1)
    B = rng.standard_normal((30, 8), dtype=np.float32)
    np.testing.assert_allclose(spmm(A, B), A @ B, rtol=1e-5, atol=1e-5)
    ((_, _, owned, fresh, _),) = PREPARED._entries.values()
    assert isinstance(fresh, FreshCSR) and fresh.kernel is None  # the first call: no Kernel bound
    assert all(o is b for o, b in zip(owned, fresh.owned_structure))  # compared against its own copies
    assert not any(np.shares_memory(o, a) for o, a in zip(owned, (A.indptr, A.indices, A.data)))
    strided = np.asfortranarray(rng.standard_normal((30, 8), dtype=np.float32))
    np.testing.assert_allclose(spmm(A, strided), A @ strided, rtol=1e-5, atol=1e-5)
    assert fresh.kernel is not None and PREPARED.hits == 1  # the second call binds one, and keeps it
    out = np.full((40, 8), np.nan, np.float32)
    assert spmm(A, B, out=out) is out
    np.testing.assert_allclose(out, A @ B, rtol=1e-5, atol=1e-5)
    A.data[0] += 1.0  # edited in place: not the kept structure any more
    np.testing.assert_allclose(spmm(A, B), A @ B, rtol=1e-5, atol=1e-5)
    assert PREPARED.misses == 2 and len(PREPARED) == 2
    fresh = [entry[3] for entry in PREPARED._entries.values()][-1]
    assert isinstance(fresh, FreshCSR) and fresh.kernel is None
    np.testing.assert_allclose(spmm(A, torch.from_numpy(B)).numpy(), A @ B, rtol=1e-5, atol=1e-5)  # the torch op
