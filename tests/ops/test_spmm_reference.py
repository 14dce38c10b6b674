"""SpMM's float64 reference and its tolerance: the magnitude is taken over the stored entries, so duplicate
entries that cancel still count the size of every term a kernel adds up (scipy's ``abs`` of a matrix sums
duplicates first; a tolerance from it is smaller than the rounding of the summed duplicates)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sparsetir.ops import compile_spmm
from sparsetir.reference.case import FLOAT32_EPS, TOLERANCE_ULPS
from sparsetir.reference.spmm import spmm_reference

# hypothesis's failing example for test_spmm_block_kernel::test_awkward_matrices (CI at 7eccdf3): one column,
# row 2 stores three duplicates that cancel to -0.0054 (the summed value, rounded in float32, is 9e-9 off)
DATA = np.array([0.33945176, 0.5922358, -0.08374458, -0.53251386, 0.84725076, -0.45517135, 0.15268032, -0.35237667,
                 0.62154126, -0.03722301, 0.53903317, -0.50716096], np.float32)
CANCELLING = sp.csr_matrix((DATA, np.zeros(12, np.int32), np.array([0, 1, 9, 12])), shape=(3, 1))
B = np.array([[0.34558418]], np.float32)


def test_the_reference_and_magnitude_sum_the_stored_entries():
    case = spmm_reference(CANCELLING, B)
    stored = np.abs(DATA.astype(np.float64))
    magnitude = np.array([stored[0], stored[1:9].sum(), stored[9:].sum()]) * float(B[0, 0])
    expected = TOLERANCE_ULPS * FLOAT32_EPS * np.sqrt([2.0, 9.0, 4.0]) * magnitude
    np.testing.assert_allclose(case.tolerance[:, 0], expected, rtol=1e-12)
    stored_sum = np.array([DATA[0], DATA[1:9].astype(np.float64).sum(), DATA[9:].astype(np.float64).sum()])
    np.testing.assert_allclose(case.reference[:, 0], stored_sum * float(B[0, 0]), rtol=1e-14)  # summed in float64
    summed = DATA.astype(np.float64)[9:].sum() * float(B[0, 0])
    assert abs(case.tolerance[2, 0]) > 100 * abs(summed) * TOLERANCE_ULPS * FLOAT32_EPS  # not |sum of duplicates|


def test_kernels_that_sum_the_duplicates_in_float32_pass():
    case = spmm_reference(CANCELLING, B)
    for fmt, knobs in [("csr", {}), ("bsr:4", {}), ("bsr:4", {"block_kernel": True})]:
        got = np.asarray(compile_spmm(CANCELLING, 1, format=fmt, **knobs)(B), np.float64)
        assert (np.abs(got - case.reference) <= case.tolerance).all(), fmt
