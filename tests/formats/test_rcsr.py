"""rcsr(parts): rows cut into contiguous parts of about equal non-zeros; SpMM and SDDMM run the
parts in parallel, race-free, and equal scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from format_cases import assert_same_csr, awkward_matrices, canonical
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sparse_cases import csr_matrices, random_dense, real_graph, tolerance

from sparsetir.backend import scheduled_module
from sparsetir.formats import RCSR, parse_format
from sparsetir.formats.rcsr import default_parts
from sparsetir.lower import lower_sparse_iter
from sparsetir.ops import compile_sddmm, compile_spmm, sddmm, spmm, spmm_function


def reference_sddmm(A, X, Y) -> np.ndarray:
    A = canonical(A)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    return A.data * np.einsum("ij,ij->i", X[rows].astype(np.float64), Y[A.indices].astype(np.float64))


def skewed_matrix(m=64, n=4096, heavy=(31, 32), light=16, seed=0) -> sp.csr_matrix:
    """``light`` entries per row, and every column in the ``heavy`` rows (around the middle part boundary)."""
    rng = np.random.default_rng(seed)
    rows = []
    for row in range(m):
        cols = np.arange(n) if row in heavy else np.sort(rng.choice(n, light, replace=False))
        rows.append(cols)
    indptr = np.cumsum([0] + [len(c) for c in rows])
    indices = np.concatenate(rows)
    return sp.csr_matrix((rng.uniform(-1, 1, indices.size).astype(np.float32), indices, indptr), shape=(m, n))


# -- conversion -----------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(A=awkward_matrices(max_dim=30, max_row=20), parts=st.integers(1, 40))
def test_round_trip_and_balanced_parts_on_awkward_matrices(A, parts):
    converted = RCSR(parts).convert(A, dtype="float64")
    expected = canonical(A)
    assert_same_csr(converted.to_csr(), expected)
    check_parts(converted, expected, parts)


@pytest.mark.parametrize("parts", [1, 2, 7, 64, 1000, 100_000])
@pytest.mark.parametrize("graph", ["cora", "pubmed"])
def test_round_trip_and_balanced_parts_on_real_graphs(graph, parts):
    A = real_graph(graph)
    converted = RCSR(parts).convert(A)
    assert_same_csr(converted.to_csr(), canonical(A).astype(np.float32))
    check_parts(converted, canonical(A), parts)


def check_parts(converted, expected: sp.csr_matrix, parts: int) -> None:
    """Contiguous row ranges covering every row once, none above ceil(nnz / parts) + max degree."""
    m = expected.shape[0]
    bounds = converted.part_indptr.astype(np.int64)
    assert converted.parts == parts and bounds.shape == (parts + 1,)
    assert bounds[0] == 0 and bounds[-1] == m and np.all(np.diff(bounds) >= 0)
    np.testing.assert_array_equal(converted.rows, np.arange(m))
    np.testing.assert_array_equal(converted.csr_position, np.arange(expected.nnz))
    part_nnz = converted.part_nnz()
    assert part_nnz.sum() == expected.nnz
    max_degree = int(np.diff(expected.indptr).max(initial=0))
    assert part_nnz.max(initial=0) <= -(-expected.nnz // parts) + max_degree


def test_parts_split_the_non_zeros_not_the_rows():
    """dblp-like skew: the first rows hold most entries, so the first part has few rows."""
    A = sp.csr_matrix(np.triu(np.ones((8, 8), np.float32)))  # degrees 8, 7, ..., 1: 36 entries
    converted = RCSR(2).convert(A)
    np.testing.assert_array_equal(converted.part_indptr, [0, 3, 8])  # rows 0-2 hold 21 entries
    np.testing.assert_array_equal(converted.part_nnz(), [21, 15])


def test_more_parts_than_rows_gives_empty_parts():
    A = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0], [4.0, 0.0]], np.float32))
    converted = RCSR(8).convert(A)
    assert (converted.part_nnz() == 0).sum() >= 5
    assert converted.part_indptr[-1] == 3
    assert_same_csr(converted.to_csr(), canonical(A))


@pytest.mark.parametrize("shape", [(0, 0), (5, 0), (0, 7), (4, 6)])
def test_empty_matrices_have_empty_parts(shape):
    converted = RCSR(3).convert(sp.csr_matrix(shape, dtype=np.float32))
    np.testing.assert_array_equal(converted.part_indptr, [0, 0, 0, shape[0]])
    assert converted.to_csr().shape == shape


def test_int64_indices_are_kept_when_asked():
    A = sp.random(40, 30, density=0.2, format="csr", random_state=1)
    converted = RCSR(4).convert(A, dtype="float64", index_dtype="int64")
    for array in (converted.part_indptr, converted.rows, converted.indptr, converted.indices):
        assert array.dtype == np.int64
    assert_same_csr(converted.to_csr(), canonical(A))


# -- parameters -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [("rcsr", RCSR()), ("rcsr:32", RCSR(32)), (" RCSR:2 ", RCSR(2))])
def test_format_strings(text, expected):
    assert parse_format(text) == expected


@pytest.mark.parametrize(("make", "message"), [
    (lambda: RCSR(0), "RCSR: parts must be >= 1"),
    (lambda: RCSR(-3), "parts must be >= 1"),
    (lambda: RCSR(2.5), "parts must be an integer"),
    (lambda: RCSR(True), "parts must be an integer"),
    (lambda: RCSR("8"), "parts must be an integer"),
    (lambda: parse_format("rcsr:0"), "parts must be >= 1"),
    (lambda: parse_format("rcsr:two"), "parts must be an integer"),
    (lambda: parse_format("rcsr:4:4"), "extra field"),
    (lambda: parse_format("rcsr:"), "parts is empty"),
])
def test_bad_parameters_raise_value_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_default_parts_resolve_to_eight_per_usable_core():
    A = sp.random(10, 10, density=0.3, format="csr", random_state=0)
    assert RCSR().resolve(A) == RCSR(default_parts()) and default_parts() % 8 == 0
    assert RCSR().convert(A).parts == default_parts()
    assert RCSR(5).resolve(A) == RCSR(5)


def test_every_parts_value_shares_one_kernel():
    """The number of parts is a runtime size, so the tuner compiles rcsr once for all of them."""
    assert RCSR(2).structure_key() == RCSR(128).structure_key() == RCSR().structure_key() == ("rcsr",)
    assert RCSR(2) != RCSR(128)


# -- Stage I / II structure -----------------------------------------------------------------------
def test_spmm_iterates_parts_then_rows_then_non_zeros_in_parallel_without_a_fill():
    stage2 = str(lower_sparse_iter(spmm_function(RCSR(8), 32)))
    assert "for t_rcsr in grid(parts_rcsr):\n        with block('spmm_rcsr0', kinds='S', parallel_safe=True)" in stage2
    assert "with init(): C[R_rcsr_indices[R_rcsr_indptr[t_rcsr] + r_rcsr], k] = T.float32(0.0)" in stage2
    assert "C[...]" not in stage2  # no zero-fill pass: each row is initialised in place
    scheduled = scheduled_module(spmm_function(RCSR(8), 32), "llvm").script()
    assert "for t_rcsr in T.parallel(parts_rcsr):" in scheduled


# -- ops ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["rcsr", "rcsr:1", "rcsr:3", "rcsr:64"])
@pytest.mark.parametrize("graph", ["cora", "pubmed"])
def test_spmm_equals_scipy_on_real_graphs(graph, fmt):
    A = real_graph(graph)
    B = random_dense(A.shape[1], 32, np.float32)
    np.testing.assert_allclose(spmm(A, B, format=fmt), A.astype(np.float64) @ B, **tolerance(np.float32))


@pytest.mark.parametrize("fmt", ["rcsr", "rcsr:5"])
@pytest.mark.parametrize("graph", ["cora", "pubmed"])
def test_sddmm_equals_scipy_on_real_graphs(graph, fmt):
    A = real_graph(graph)
    X, Y = random_dense(A.shape[0], 16, np.float32, 1), random_dense(A.shape[1], 16, np.float32, 2)
    got = sddmm(A, X, Y, format=fmt)
    np.testing.assert_array_equal(got.indices, canonical(A).indices)
    np.testing.assert_allclose(got.data, reference_sddmm(A, X, Y), **tolerance(np.float32))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(A=csr_matrices(max_dim=20, max_row=12), parts=st.integers(1, 30),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_spmm_and_sddmm_equal_scipy_on_awkward_matrices(A, parts, dtype):
    """0x0, empty rows, duplicates, int64 indices, more parts than rows."""
    B = random_dense(A.shape[1], 8, dtype)
    np.testing.assert_allclose(spmm(A, B, format=f"rcsr:{parts}"), A @ B.astype(np.float64), **tolerance(dtype))
    X, Y = random_dense(A.shape[0], 5, dtype, 3), random_dense(A.shape[1], 5, dtype, 4)
    got = sddmm(A, X, Y, format=f"rcsr:{parts}")
    np.testing.assert_allclose(got.data, reference_sddmm(A, X, Y), **tolerance(dtype))


@pytest.mark.parametrize("A", [
    sp.csr_matrix((0, 0), dtype=np.float32),
    sp.csr_matrix((6, 9), dtype=np.float32),
    sp.csr_matrix(np.arange(1, 10, dtype=np.float32)[None, :]),  # a single row
    skewed_matrix(m=5, n=3000, heavy=(2,), light=1),  # one row of huge degree
], ids=["0x0", "no-entries", "single-row", "huge-row"])
@pytest.mark.parametrize("parts", [1, 4, 50])
def test_spmm_edge_cases_equal_scipy(A, parts):
    B = random_dense(A.shape[1], 16, np.float32)
    np.testing.assert_allclose(spmm(A, B, format=f"rcsr:{parts}"), A.astype(np.float64) @ B, **tolerance(np.float32))


def test_int64_index_kernel_equals_scipy():
    A = real_graph("cora")
    kernel = compile_spmm(A, 16, format="rcsr:8", index_dtype="int64")
    assert kernel.spec["index_dtype"] == "int64"
    B = random_dense(A.shape[1], 16, np.float32)
    np.testing.assert_allclose(kernel(B), A.astype(np.float64) @ B, **tolerance(np.float32))


def test_new_values_and_sddmm_outputs_in_csr_order():
    A = real_graph("cora")
    B = random_dense(A.shape[1], 16, np.float32)
    values = np.random.default_rng(5).uniform(size=canonical(A).nnz).astype(np.float32)
    kernel = compile_spmm(A, 16, format="rcsr:4")
    reweighted = sp.csr_matrix((values, canonical(A).indices, canonical(A).indptr), shape=A.shape)
    np.testing.assert_allclose(kernel(B, values=values), reweighted @ B.astype(np.float64), **tolerance(np.float32))
    X, Y = random_dense(A.shape[0], 8, np.float32, 1), random_dense(A.shape[1], 8, np.float32, 2)
    np.testing.assert_allclose(compile_sddmm(A, 8, format="rcsr:4")(X, Y), reference_sddmm(A, X, Y),
                               **tolerance(np.float32))


# -- races ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("parts", [2, 3, 64])
def test_repeated_runs_never_race_with_huge_rows_at_a_part_boundary(parts):
    """Rows 31 and 32 hold every column and meet at the middle boundary, so with two threads both
    parts run long at the same time; every run must give the same, correct result."""
    A = skewed_matrix()
    converted = RCSR(parts).convert(A)
    if parts == 2:
        np.testing.assert_array_equal(converted.part_indptr, [0, 32, 64])  # the heavy rows straddle it
    B = random_dense(A.shape[1], 16, np.float32)
    want = A.astype(np.float64) @ B
    kernel = compile_spmm(A, 16, format=f"rcsr:{parts}")
    first = kernel(B)
    np.testing.assert_allclose(first, want, **tolerance(np.float32))
    out = np.full_like(first, np.nan)
    for _ in range(40):
        out.fill(np.nan)  # rows left unwritten (a missing init) would show as NaN
        kernel(B, out=out)
        np.testing.assert_array_equal(out, first)


def test_validation_refuses_a_row_listed_in_two_parts():
    """The disjointness the parallel proof relies on is checked on the kernel's arrays."""
    A = skewed_matrix(m=8, n=64, heavy=(), light=4)
    kernel = compile_spmm(A, 16, format="rcsr:2")
    arrays = {name: np.array(a, copy=True) for name, a in kernel._bound.items()}
    arrays["R_rcsr_indices"][-1] = 0  # row 0 again, in the second part
    B, C = random_dense(A.shape[1], 16, np.float32), np.zeros((8, 16), np.float32)
    with pytest.raises(ValueError, match="promises disjoint rows"):
        kernel.function(B=B, C=C, **arrays, **kernel.sizes)
