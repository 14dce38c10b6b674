"""Every baseline computes exactly the operation it stands for, on the same prepared inputs."""

import numpy as np
import pytest
import scipy.sparse as sp

from baselines import cupy_sparse, dense, dgl_ops, pyg, scipy_sparse, torch_sparse

MODULES = [scipy_sparse, torch_sparse, dense, pyg, dgl_ops, cupy_sparse]
SPMM = [(module, name) for module in MODULES for name in module.SPMM_VARIANTS]
SDDMM = [(module, name) for module in MODULES for name in module.SDDMM_VARIANTS]


@pytest.fixture
def matrix():
    """A 40 x 30 random CSR matrix whose row 7 is empty."""
    A = sp.random(40, 30, density=0.2, format="lil", dtype=np.float32, random_state=3)
    A[7, :] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    assert A.indptr[7] == A.indptr[8]
    return A


def _require(module, op):
    ok, reason = module.available(op, "cuda" if module is cupy_sparse else "cpu")
    assert isinstance(reason, str) and reason
    if not ok:
        pytest.skip(reason)


@pytest.mark.parametrize("module,name", SPMM, ids=[name for _, name in SPMM])
def test_spmm_baseline_equals_scipy(module, name, matrix):
    _require(module, "spmm")
    B = np.random.default_rng(0).standard_normal((30, 8), dtype=np.float32)
    run = module.SPMM_VARIANTS[name](matrix, B)
    expected = matrix @ B
    for _ in range(2):  # a second call must not accumulate into the first result
        np.testing.assert_allclose(np.asarray(run()), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("module,name", SDDMM, ids=[name for _, name in SDDMM])
def test_sddmm_baseline_equals_scipy(module, name, matrix):
    _require(module, "sddmm")
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 8), dtype=np.float32)
    Y = rng.standard_normal((30, 8), dtype=np.float32)
    run = module.SDDMM_VARIANTS[name](matrix, X, Y)
    expected = matrix.multiply(X @ Y.T).tocsr()
    expected.sort_indices()
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(run()), expected.data, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("module,name", SDDMM, ids=[name for _, name in SDDMM])
def test_sddmm_baseline_sums_duplicates_first(module, name):
    _require(module, "sddmm")
    A = sp.csr_matrix((np.array([1.0, 2.0, 3.0], np.float32), np.array([1, 1, 0]), np.array([0, 2, 3])), shape=(2, 2))
    X = np.array([[1.0], [2.0]], np.float32)
    Y = np.array([[10.0], [100.0]], np.float32)
    np.testing.assert_allclose(np.asarray(module.SDDMM_VARIANTS[name](A, X, Y)()), [300.0, 60.0])  # (1+2)*1*100, 3*2*10
    assert A.nnz == 3  # the caller's matrix is untouched


def test_dense_baseline_refuses_a_matrix_over_the_limit(matrix, monkeypatch):
    with pytest.raises(ValueError, match="dense A would take .* over the 0.00 GiB limit"):
        dense.spmm_dense(matrix, np.zeros((30, 4), np.float32), limit_bytes=1024)
    monkeypatch.setattr(dense, "DENSE_LIMIT_BYTES", 1024)
    with pytest.raises(ValueError, match="dense A would take"):
        dense.spmm_dense(matrix, np.zeros((30, 4), np.float32))


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_unknown_op_is_refused(module):
    with pytest.raises(ValueError, match="unknown op"):
        module.available("spgemm")


def test_shape_mismatch_is_refused(matrix):
    with pytest.raises(ValueError, match="B must have shape"):
        scipy_sparse.spmm(matrix, np.zeros((31, 4), np.float32))
