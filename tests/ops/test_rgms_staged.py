"""Staged tiles (``rtile``: gather -> register-blocked product -> scatter) equal the float64 reference:
R-GCN graphs (AIFB, MUTAG), a KITTI crop convolution, awkward hypothesis graphs (empty relations and
parts, one pair, channels 1, 3, 17, 513, int64 indices), every staged knob, half precision, values=."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sparse_cases import kitti_crop

from sparsetir.formats import parse_format
from sparsetir.formats.relational import RelationalMatrix, read_relational_input
from sparsetir.ops import compile_rgms, compile_sparse_conv3d, kernel_map, rgms
from sparsetir.reference.conv import conv_reference
from sparsetir.reference.rgms import rgms_reference


def relational(name: str) -> RelationalMatrix:
    from sparsetir import data

    try:
        return read_relational_input(data.load_relational(name))
    except (FileNotFoundError, OSError) as error:
        pytest.skip(f"relational graph {name} unavailable: {error}")


def operands(shape_n, R, f_in, f_out, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((shape_n, f_in)).astype(dtype)
    W = (rng.standard_normal((R, f_in, f_out)) / np.sqrt(f_in)).astype(dtype)
    return X, W


def assert_matches(Y, case):
    got = np.asarray(Y, dtype=np.float64)
    assert got.shape == case.reference.shape
    excess = np.abs(got - case.reference) - case.tolerance
    assert (excess <= 0).all(), f"worst excess {excess.max():.3g}"


def check_rgms(matrix, f_in, f_out, fmt="rtile", seed=0, **knobs):
    X, W = operands(matrix.shape[1], matrix.num_relations, f_in, f_out, seed)
    assert_matches(rgms(matrix, X, W, format=fmt, **knobs), rgms_reference(matrix, X, W))


@pytest.mark.parametrize("name", ["aifb", "mutag"])
def test_real_rgcn_graphs(name):
    check_rgms(relational(name), 32, 32)


def test_a_kitti_crop_convolution():
    coords, _ = kitti_crop(extent=300)  # 3,629 voxels
    for stride, (c_in, c_out) in ((1, (16, 32)), (2, (32, 64))):
        kmap = kernel_map(coords, stride=stride, spatial_shape=(coords[:, 1:].max(0) + 1).tolist())
        X, W = operands(kmap.num_inputs, kmap.num_offsets, c_in, c_out)
        kernel = compile_sparse_conv3d(kmap, c_in, c_out, format="rtile:16:4", gather=True)
        assert_matches(kernel(X, W), conv_reference(kmap, X, W))


@pytest.mark.parametrize("knobs", [{}, {"gather": True}, {"cin_split": 4}, {"register_rows": 8, "register_vectors": 1},
                                   {"register_rows": 2, "vector_width": 4}])
@pytest.mark.parametrize("fmt", ["rtile", "rtile:8:3", "rtile:32:1"])
def test_every_knob_and_tile_shape(fmt, knobs):
    matrices = [sp.random(70, 50, density=0.06, format="csr", dtype=np.float32, random_state=r) for r in range(4)]
    matrices[2] = sp.csr_matrix((70, 50), dtype=np.float32)  # a relation with no pairs: no tiles
    check_rgms(read_relational_input(matrices), 8, 48, fmt, **knobs)


@pytest.mark.parametrize("channels", [(1, 1), (3, 17), (17, 3), (513, 2), (2, 513)])
def test_channels_not_a_multiple_of_the_tile_or_the_vector(channels):
    matrices = [sp.random(30, 25, density=0.1, format="csr", dtype=np.float32, random_state=r) for r in range(3)]
    check_rgms(read_relational_input(matrices), *channels)


def test_one_pair_and_nothing_at_all():
    one = sp.csr_matrix((np.ones(1, np.float32), ([3], [1])), shape=(5, 4))
    check_rgms(read_relational_input([one, sp.csr_matrix((5, 4), dtype=np.float32)]), 3, 5)
    check_rgms(read_relational_input([sp.csr_matrix((5, 4), dtype=np.float32)]), 3, 5)


@st.composite
def relational_inputs(draw):
    R, m, n = draw(st.integers(1, 4)), draw(st.integers(0, 40)), draw(st.integers(0, 12))
    matrices = []
    for _ in range(R):
        density = draw(st.sampled_from([0.0, 0.05, 0.4, 1.0]))
        A = sp.random(m, n, density=density, format="csr", dtype=np.float32, random_state=draw(st.integers(0, 999))) \
            if m and n else sp.csr_matrix((m, n), dtype=np.float32)
        index_dtype = draw(st.sampled_from([np.int32, np.int64]))
        matrices.append(sp.csr_matrix((A.data, A.indices.astype(index_dtype), A.indptr.astype(index_dtype)),
                                      shape=(m, n)))
    return matrices


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(relational_inputs(), st.sampled_from(["rtile:4:3", "rtile:16:8"]), st.sampled_from(["int32", "int64"]))
def test_awkward_graphs(matrices, fmt, index_dtype):
    matrix = read_relational_input(matrices)
    X, W = operands(matrix.shape[1], matrix.num_relations, 5, 16)
    assert_matches(rgms(matrices, X, W, format=fmt, index_dtype=index_dtype), rgms_reference(matrix, X, W))


def test_values_follow_the_input_order():
    matrices = [sp.random(40, 30, density=0.1, format="csr", dtype=np.float32, random_state=9 + r) for r in range(3)]
    matrix = read_relational_input(matrices)
    X, W = operands(30, 3, 6, 16)
    kernel = compile_rgms(matrices, 6, 16, format="rtile:8:2")
    new = np.random.default_rng(1).standard_normal(matrix.nnz).astype(np.float32)
    reweighted = RelationalMatrix(matrix.shape, matrix.num_relations, matrix.indptr, matrix.indices, new)
    assert_matches(kernel(X, W, values=new), rgms_reference(reweighted, X, W))
    assert_matches(kernel(X, W), rgms_reference(matrix, X, W))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_accumulates_in_float32(dtype):
    torch = pytest.importorskip("torch")
    matrices = [sp.random(40, 30, density=0.1, format="csr", dtype=np.float32, random_state=r) for r in range(3)]
    matrix = read_relational_input(matrices)
    X, W = operands(30, 3, 16, 32)
    X16, W16 = (torch.from_numpy(a).to(getattr(torch, dtype)) for a in (X, W))
    Y = rgms(matrices, X16, W16, format="rtile")
    assert Y.dtype == getattr(torch, dtype)
    reference = rgms_reference(matrix, X16.float().numpy(), W16.float().numpy()).reference  # of the rounded inputs
    scale = np.abs(reference).max()  # the output's own rounding, once: float32 accumulation
    np.testing.assert_allclose(Y.float().numpy(), reference, atol=(2e-2 if dtype == "bfloat16" else 4e-3) * scale)


def test_the_format_keeps_one_relation_per_tile_and_parts_own_their_rows():
    matrices = [sp.random(50, 20, density=0.2, format="csr", dtype=np.float32, random_state=r) for r in range(3)]
    matrix = read_relational_input(matrices)
    fmt = parse_format("rtile:8:4")
    arrays, sizes, layout = fmt.build(matrix, "int32")
    position = layout.values["A"].reshape(-1, 8)
    assert np.array_equal(np.sort(position[position >= 0]), np.arange(matrix.nnz))  # every pair once
    relation, row, col = matrix.coordinates()
    tile_relation = np.asarray(arrays["T_indices"])
    for tile, slots in enumerate(position):
        stored = slots[slots >= 0]
        assert stored.size and (relation[stored] == tile_relation[tile]).all()
    rows = np.asarray(arrays["S_indices"]).reshape(-1, 8)
    indptr = np.asarray(arrays["T_indptr"])
    owners = [set(rows[indptr[p]:indptr[p + 1]].ravel().tolist()) for p in range(4)]
    assert all(not (a & b) for i, a in enumerate(owners) for b in owners[i + 1:])  # padding included


def test_bad_knobs_are_refused_before_any_kernel_runs():
    matrices = [sp.random(10, 10, density=0.2, format="csr", dtype=np.float32, random_state=1)]
    X, W = operands(10, 1, 4, 4)
    with pytest.raises(ValueError, match="dataflow"):
        rgms(matrices, X, W, format="rtile", dataflow="aggregate")
    with pytest.raises(ValueError, match="register_rows"):
        rgms(matrices, X, W, format="rtile", register_rows=0)
    with pytest.raises(ValueError, match="rtile"):
        rgms(matrices, X, W, format="csf", gather=True)
    with pytest.raises(ValueError, match="rows"):
        parse_format("rtile:0")


def test_the_untuned_default_stages_where_the_cost_rule_says_so():
    from sparsetir.ops.rgms import choose_staged

    coords, _ = kitti_crop(extent=300)  # 3,629 voxels
    kmap = kernel_map(coords, spatial_shape=(coords[:, 1:].max(0) + 1).tolist())
    assert choose_staged(kmap.relational(), 32, 32)  # a kernel map: one input per (output, offset)
    assert compile_sparse_conv3d(kmap, 32, 32).spec["format"].startswith("RTile")
    assert compile_sparse_conv3d(kmap, 32, 32, stage=False).spec["format"] == "CSF()"
    aifb = relational("aifb")
    assert not choose_staged(aifb, 32, 32)  # rows repeat per relation: csf aggregates first
    assert compile_rgms(aifb, 32, 32).spec["format"] == "CSF()"
    assert compile_rgms(aifb, 32, 32, stage=True).spec["format"].startswith("RTile")
    assert not choose_staged(kmap.relational(), 3, 5)  # products too small for the micro-kernel
    with pytest.raises(ValueError, match="contradicts"):
        compile_rgms(aifb, 32, 32, format="csf", stage=True)
