"""Every baseline computes exactly the operation it stands for, on the same prepared inputs."""

import numpy as np
import pytest
import scipy.sparse as sp

import baselines
from baselines import dense, scipy_sparse

SPMM = list(baselines.variants("spmm"))
SDDMM = list(baselines.variants("sddmm"))


@pytest.fixture
def matrix():
    """A 40 x 30 random CSR matrix whose row 7 is empty."""
    A = sp.random(40, 30, density=0.2, format="lil", dtype=np.float32, random_state=3)
    A[7, :] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    assert A.indptr[7] == A.indptr[8]
    return A


def _build(op, name, *inputs):
    """The variant on the first device it is listed for (the GPU ones skip here without a GPU)."""
    entry = baselines.baseline(op, name)
    device = entry.variant.devices[0]
    ok, reason = entry.available(device)
    assert isinstance(reason, str) and reason
    if not ok:
        pytest.skip(reason)
    return entry.build(*inputs, device=device)


@pytest.mark.parametrize("name", SPMM)
def test_spmm_baseline_equals_scipy(name, matrix):
    B = np.random.default_rng(0).standard_normal((30, 8), dtype=np.float32)
    run = _build("spmm", name, matrix, B)
    expected = matrix @ B
    for _ in range(2):  # a second call must not accumulate into the first result
        np.testing.assert_allclose(np.asarray(run()), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", SDDMM)
def test_sddmm_baseline_equals_scipy(name, matrix):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 8), dtype=np.float32)
    Y = rng.standard_normal((30, 8), dtype=np.float32)
    run = _build("sddmm", name, matrix, X, Y)
    expected = matrix.multiply(X @ Y.T).tocsr()
    expected.sort_indices()
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(run()), expected.data, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", SDDMM)
def test_sddmm_baseline_sums_duplicates_first(name):
    A = sp.csr_matrix((np.array([1.0, 2.0, 3.0], np.float32), np.array([1, 1, 0]), np.array([0, 2, 3])), shape=(2, 2))
    X = np.array([[1.0], [2.0]], np.float32)
    Y = np.array([[10.0], [100.0]], np.float32)
    np.testing.assert_allclose(np.asarray(_build("sddmm", name, A, X, Y)()), [300.0, 60.0])  # (1+2)*1*100, 3*2*10
    assert A.nnz == 3  # the caller's matrix is untouched


def test_dense_baseline_refuses_a_matrix_over_the_limit(matrix, monkeypatch):
    with pytest.raises(ValueError, match="dense A would take .* over the 0.00 GiB limit"):
        dense.spmm_dense(matrix, np.zeros((30, 4), np.float32), limit_bytes=1024)
    monkeypatch.setattr(dense, "DENSE_LIMIT_BYTES", 1024)
    with pytest.raises(ValueError, match="dense A would take"):
        dense.spmm_dense(matrix, np.zeros((30, 4), np.float32))


def test_shape_mismatch_is_refused(matrix):
    with pytest.raises(ValueError, match="B must have shape"):
        scipy_sparse.spmm(matrix, np.zeros((31, 4), np.float32))
