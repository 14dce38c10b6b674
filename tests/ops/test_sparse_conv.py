"""Sparse 3-D convolution: kernel maps equal a brute-force enumeration (and spconv's rules), the
convolution equals dense ``conv3d`` on small grids and spconv on KITTI crops, in both dataflows,
on awkward clouds (empty, one point, duplicates, several batches), in half precision, and tuned
per layer; bad input is refused with a message naming it. (Emulated CUDA: test_sparse_conv_cuda.py.)"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sparse_cases
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparsetir.ops import KernelMap, compile_sparse_conv3d, kernel_map, sparse_conv3d, voxelize
from sparsetir.reference.conv import conv_reference

C_IN, C_OUT = 3, 5  # one channel pair everywhere, so the kernels compile once per format


def random_cloud(n, extent, batches=1, seed=0, unique=True):
    rng = np.random.default_rng(seed)
    points = np.c_[rng.integers(0, batches, n), rng.integers(0, extent, (n, 3))]
    return np.unique(points, axis=0) if unique else points


def operands(n, K, c_in=C_IN, c_out=C_OUT, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, c_in)).astype(dtype),
            (rng.standard_normal((K, c_in, c_out)) / np.sqrt(c_in)).astype(dtype))


def assert_matches(Y, kmap, X, W):
    case = conv_reference(kmap, X, W)
    got = np.asarray(Y, dtype=np.float64)
    assert got.shape == case.reference.shape
    excess = np.abs(got - case.reference) - case.tolerance
    assert (excess <= 0).all(), f"worst excess {excess.max():.3g}"


# ---------------------------------------------------------------- kernel maps


def brute_force_pairs(coords, kernel_size, stride, dilation, submanifold, shape):
    """{(k, input row, output)} and the output coordinates, by looping over everything; an output is its
    row for a submanifold map (duplicate points are outputs of their own), else its coordinate."""
    coords = [tuple(map(int, c)) for c in coords]
    submanifold = submanifold and stride == 1
    offsets = list(itertools.product(range(kernel_size), repeat=3))
    pairs, outputs = set(), set()
    if submanifold:
        reach = kernel_size // 2
        for row, q in enumerate(coords):
            outputs.add(q)
            for k, a in enumerate(offsets):
                want = (q[0], *(q[1 + i] + (a[i] - reach) * dilation for i in range(3)))
                pairs |= {(k, j, row) for j, p in enumerate(coords) if p == want}
        return pairs, outputs
    padding = kernel_size // 2
    out_shape = [(s + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1 for s in shape]
    for j, p in enumerate(coords):
        for k, a in enumerate(offsets):
            q = []
            for i in range(3):
                t = p[1 + i] + padding - a[i] * dilation
                if t < 0 or t % stride or t // stride >= out_shape[i]:
                    break
                q.append(t // stride)
            else:
                outputs.add((p[0], *q))
                pairs.add((k, j, (p[0], *q)))
    return pairs, outputs


@st.composite
def point_sets(draw):
    n = draw(st.integers(0, 25))
    extent = draw(st.integers(1, 7))
    batches = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 10_000))
    coords = random_cloud(n, extent, batches, seed, unique=draw(st.booleans()))  # duplicates now and then
    return coords.astype(draw(st.sampled_from([np.int32, np.int64])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(point_sets(), st.sampled_from([1, 2, 3]), st.sampled_from([1, 2, 3]), st.sampled_from([1, 2]),
       st.booleans(), st.integers(0, 2))
def test_kernel_map_equals_brute_force(coords, kernel_size, stride, dilation, submanifold, margin):
    if submanifold and stride == 1 and kernel_size % 2 == 0:
        return  # refused (no centre); tested below
    shape = (coords[:, 1:].max(0) + 1 if len(coords) else np.ones(3, int)) + margin
    try:
        kmap = kernel_map(coords, kernel_size=kernel_size, stride=stride, dilation=dilation,
                          submanifold=submanifold, spatial_shape=shape)
    except ValueError as error:
        assert "output grid" in str(error)  # the kernel does not fit the grid (spconv refuses it too)
        return
    pairs, outputs = brute_force_pairs(coords, kernel_size, stride, dilation, submanifold, shape)
    got = {(k, int(i), int(o) if kmap.submanifold else tuple(map(int, kmap.out_coords[o])))
           for k in range(kmap.num_offsets) for i, o in zip(*kmap.pairs(k))}
    assert got == pairs and len(got) == kmap.num_pairs
    assert set(map(tuple, kmap.out_coords.tolist())) == outputs
    if kmap.submanifold:
        np.testing.assert_array_equal(kmap.out_coords, coords)
    else:
        assert len(outputs) == kmap.num_outputs  # distinct, and sorted
        assert all(tuple(a) < tuple(b) for a, b in zip(kmap.out_coords.tolist(), kmap.out_coords[1:].tolist()))
    for k in range(kmap.num_offsets):  # each offset's pairs sorted by output, then input
        i, o = kmap.pairs(k)
        assert (np.diff(o * max(len(coords), 1) + i) > 0).all()
    assert kmap.offsets.shape == (kernel_size ** 3, 3) and kmap.indptr[-1] == kmap.num_pairs


@pytest.mark.slow
def test_kernel_map_equals_spconv_rules():
    spconv_ops = pytest.importorskip("spconv.pytorch.ops", reason="spconv is not installed (pip install '.[conv]')")
    from spconv.core import ConvAlgo

    coords = random_cloud(300, 9, batches=2, seed=4)
    shape = [10, 9, 11]
    for stride, dilation, kernel_size in [(2, 1, 3), (2, 2, 3), (2, 1, 2), (3, 1, 5)]:
        kmap = kernel_map(coords, kernel_size=kernel_size, stride=stride, dilation=dilation, spatial_shape=shape)
        out_ids, pairs, counts = spconv_ops.get_indice_pairs(
            torch.from_numpy(coords.astype(np.int32)), 2, shape, ConvAlgo.Native, [kernel_size] * 3, [stride] * 3,
            [kernel_size // 2] * 3, [dilation] * 3, [0] * 3, False, False)
        assert set(map(tuple, out_ids.tolist())) == set(map(tuple, kmap.out_coords.tolist()))
        for k in range(kernel_size ** 3):
            n = int(counts[k])
            theirs = {(int(i), tuple(out_ids[o].tolist())) for i, o in zip(pairs[0, k, :n], pairs[1, k, :n])}
            i, o = kmap.pairs(k)
            assert theirs == {(int(a), tuple(kmap.out_coords[b].tolist())) for a, b in zip(i, o)}


def test_kernel_map_refuses_bad_input():
    good = random_cloud(10, 4)
    with pytest.raises(TypeError, match="integers"):
        kernel_map(good.astype(np.float32))
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        kernel_map(good[:, 1:])
    with pytest.raises(ValueError, match="batch indices must be >= 0"):
        kernel_map(np.r_[good, [[-1, 0, 0, 0]]])
    with pytest.raises(ValueError, match="voxel coordinates must be >= 0"):
        kernel_map(np.r_[good, [[0, 0, -2, 0]]])
    with pytest.raises(ValueError, match="kernel_size must be >= 1"):
        kernel_map(good, kernel_size=0)
    with pytest.raises(TypeError, match="stride must be an int"):
        kernel_map(good, stride=2.0)
    with pytest.raises(ValueError, match="odd kernel_size"):
        kernel_map(good, kernel_size=2)
    with pytest.raises(ValueError, match="does not hold"):
        kernel_map(good, spatial_shape=(1, 1, 1))
    with pytest.raises(TypeError, match="numpy array or torch tensor"):
        kernel_map(good.tolist())


# ---------------------------------------------------------------- the convolution against dense conv3d


def dense_conv(coords, X, W, kernel_size, stride, dilation, submanifold, shape):
    """torch conv3d over the dense grid (duplicates summed), read at the kernel map's outputs."""
    batches = int(coords[:, 0].max()) + 1
    grid = torch.zeros(batches, X.shape[1], *shape, dtype=torch.float64)
    index = torch.from_numpy(coords.astype(np.int64))
    flat = grid.permute(0, 2, 3, 4, 1)  # (B, D, H, W, C) view
    flat.index_put_((index[:, 0], index[:, 1], index[:, 2], index[:, 3]), torch.from_numpy(X).double(),
                    accumulate=True)
    weight = torch.from_numpy(W).double().reshape(kernel_size, kernel_size, kernel_size, *W.shape[1:])
    weight = weight.permute(4, 3, 0, 1, 2)  # (c_out, c_in, kx, ky, kz)
    padding = (kernel_size // 2) * dilation if submanifold else kernel_size // 2
    out = torch.nn.functional.conv3d(grid, weight, stride=1 if submanifold else stride, padding=padding,
                                     dilation=dilation)
    return out.permute(0, 2, 3, 4, 1)  # (B, D, H, W, c_out)


@pytest.mark.parametrize("stride,dilation,submanifold", [(1, 1, True), (1, 2, True), (2, 1, False), (2, 2, False),
                                                         (1, 1, False)])
@pytest.mark.parametrize("fmt", ["csf", "relcsr"])
def test_equals_dense_conv3d(stride, dilation, submanifold, fmt):
    coords = random_cloud(160, 8, batches=2, seed=stride + 3 * dilation)
    shape = (9, 8, 10)
    kmap = kernel_map(coords, stride=stride, dilation=dilation, submanifold=submanifold, spatial_shape=shape)
    X, W = operands(len(coords), 27)
    Y = sparse_conv3d(X, kmap, W, format=fmt)
    dense = dense_conv(coords, X, W, 3, stride, dilation, kmap.submanifold, shape)
    assert tuple(dense.shape[1:4]) == tuple(kmap.out_spatial_shape)
    at = kmap.out_coords
    np.testing.assert_allclose(Y, dense[at[:, 0], at[:, 1], at[:, 2], at[:, 3]].numpy(), rtol=1e-4, atol=1e-5)
    if not kmap.submanifold:  # every other output voxel of the dense result is empty
        mask = torch.ones(dense.shape[:4], dtype=torch.bool)
        mask[at[:, 0], at[:, 1], at[:, 2], at[:, 3]] = False
        assert float(dense[mask].abs().sum()) == 0.0


def test_duplicate_points_are_summed_as_in_a_dense_grid():
    coords = random_cloud(120, 5, batches=2, seed=9, unique=False)
    assert len(np.unique(coords, axis=0)) < len(coords)
    X, W = operands(len(coords), 27)
    for stride, submanifold in [(1, True), (2, False)]:
        kmap = kernel_map(coords, stride=stride, submanifold=submanifold, spatial_shape=(6, 6, 6))
        Y = sparse_conv3d(X, kmap, W)
        dense = dense_conv(coords, X, W, 3, stride, 1, kmap.submanifold, (6, 6, 6))
        at = kmap.out_coords
        np.testing.assert_allclose(Y, dense[at[:, 0], at[:, 1], at[:, 2], at[:, 3]].numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("coords", [np.zeros((0, 4), np.int64), np.array([[0, 3, 1, 2]], np.int32)],
                         ids=["empty", "one-point"])
def test_empty_and_single_point_clouds(coords):
    X, W = operands(len(coords), 27)
    for stride in (1, 2):
        kmap = kernel_map(coords, stride=stride)
        Y = sparse_conv3d(X, kmap, W)
        assert Y.shape == (kmap.num_outputs, C_OUT)
        assert_matches(Y, kmap, X, W)
    if len(coords):
        np.testing.assert_allclose(sparse_conv3d(X, kernel_map(coords), W), X @ W[13], rtol=1e-6)  # the centre


def test_torch_in_torch_out_and_out_buffer():
    coords = torch.from_numpy(random_cloud(80, 6, batches=3, seed=2))
    kmap = kernel_map(coords, stride=2)
    X, W = (torch.from_numpy(a) for a in operands(len(coords), 27))
    out = torch.empty(kmap.num_outputs, C_OUT)
    assert sparse_conv3d(X, kmap, W, out=out) is out
    assert_matches(out.numpy(), kmap, X.numpy(), W.numpy())
    assert compile_sparse_conv3d(kmap, C_IN, C_OUT) is compile_sparse_conv3d(kmap, C_IN, C_OUT)  # compiled once


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_accumulates_in_float32(dtype):
    coords = random_cloud(120, 6, seed=5)
    kmap = kernel_map(coords)
    X, W = operands(len(coords), 27)
    torch_dtype = getattr(torch, dtype)
    Xh, Wh = torch.from_numpy(X).to(torch_dtype), torch.from_numpy(W).to(torch_dtype)
    Y = sparse_conv3d(Xh, kmap, Wh)
    assert Y.dtype == torch_dtype
    reference = conv_reference(kmap, Xh.float().numpy(), Wh.float().numpy()).reference
    scale = np.abs(reference).max()
    np.testing.assert_allclose(Y.float().numpy(), reference, atol=(2e-2 if dtype == "bfloat16" else 4e-3) * scale)


def test_sparse_conv3d_refuses_bad_input():
    coords = random_cloud(30, 5)
    kmap = kernel_map(coords)
    X, W = operands(len(coords), 27)
    with pytest.raises(TypeError, match="KernelMap"):
        sparse_conv3d(X, coords, W)
    with pytest.raises(ValueError, match=f"{len(coords)} input points"):
        sparse_conv3d(X[:10], kmap, W)
    with pytest.raises(ValueError, match=r"weight must be \(27, 3, c_out\)"):
        sparse_conv3d(X, kmap, W[:9])
    with pytest.raises(TypeError, match="one type and dtype"):
        sparse_conv3d(X, kmap, W.astype(np.float64))
    with pytest.raises(TypeError, match="one type and dtype"):
        sparse_conv3d(torch.from_numpy(X), kmap, W)
    with pytest.raises(ValueError, match="relational format"):
        sparse_conv3d(X, kmap, W, format="csr")


# ---------------------------------------------------------------- spconv on KITTI crops


@pytest.fixture(scope="module")
def kitti_crop():
    return sparse_cases.kitti_crop()  # a corner of the scan: a few thousand voxels


@pytest.mark.slow
@pytest.mark.parametrize("stride", [1, 2])
def test_equals_spconv_on_a_kitti_crop(kitti_crop, stride):
    nn = pytest.importorskip("spconv.pytorch", reason="spconv is not installed (pip install '.[conv]')")
    coords, features = kitti_crop
    c_in, c_out = features.shape[1], 16
    shape = (coords[:, 1:].max(0) + 1).tolist()
    conv = (nn.SubMConv3d(c_in, c_out, 3, bias=False) if stride == 1 else
            nn.SparseConv3d(c_in, c_out, 3, stride=2, padding=1, bias=False))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # spconv's CPU scatter writes a few wrong rows with several threads
    try:
        with torch.no_grad():
            out = conv(nn.SparseConvTensor(torch.from_numpy(features), torch.from_numpy(coords.astype(np.int32)),
                                           shape, 1))
    finally:
        torch.set_num_threads(threads)
    W = conv.weight.detach().permute(1, 2, 3, 4, 0).reshape(27, c_in, c_out).contiguous()  # same weights
    kmap = kernel_map(coords, stride=stride, spatial_shape=shape)
    Y = sparse_conv3d(torch.from_numpy(features), kmap, W).numpy()
    theirs = {tuple(c): f for c, f in zip(out.indices.tolist(), out.features.numpy())}
    assert len(theirs) == kmap.num_outputs
    expected = np.stack([theirs[tuple(c)] for c in kmap.out_coords.tolist()])
    np.testing.assert_allclose(Y, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


# ---------------------------------------------------------------- voxelisation


def test_voxelize_gives_sorted_voxels_and_mean_features():
    points = np.array([[0.05, 0.02, 0.0, 1.0], [0.09, 0.01, 0.05, 3.0], [0.31, 0.0, 0.0, 5.0],
                       [-0.25, 0.45, 0.0, 7.0]], np.float32)
    coords, features, inverse = voxelize(points, 0.1, return_inverse=True)
    assert coords.tolist() == [[0, 0, 4, 0], [0, 3, 0, 0], [0, 6, 0, 0]]  # floor(x / 0.1) - min, sorted
    np.testing.assert_allclose(features[1], [0.07, 0.015, 0.025, 2.0], rtol=1e-6)
    assert inverse.tolist() == [1, 1, 2, 0]
    t_coords, t_features = voxelize(torch.from_numpy(points), (0.1, 0.1, 0.1), batch=np.array([0, 0, 1, 1]))
    assert isinstance(t_features, torch.Tensor) and t_coords[:, 0].tolist() == [0, 1, 1]
    assert voxelize(np.zeros((0, 4), np.float32), 0.1)[0].shape == (0, 4)
    with pytest.raises(ValueError, match="positive"):
        voxelize(points, 0.0)
    with pytest.raises(ValueError, match="C >= 3"):
        voxelize(points[:, :2], 0.1)
    with pytest.raises(TypeError, match="floating point"):
        voxelize(points.astype(np.int64), 0.1)


# ---------------------------------------------------------------- formats, dataflows, tuning


def test_every_relational_format_and_feature_order_agrees():
    coords = random_cloud(100, 6, batches=2, seed=7)
    kmap = kernel_map(coords, stride=2)
    X, W = operands(len(coords), 27)
    for fmt in ("csf", "relcsr", "ell3d"):
        for feature_loops in ("lk", "kl"):
            assert_matches(sparse_conv3d(X, kmap, W, format=fmt, feature_loops=feature_loops), kmap, X, W)
    assert compile_sparse_conv3d(kmap, C_IN, C_OUT).spec["format"] == "CSF()"


@pytest.mark.slow
def test_auto_tunes_per_layer_and_reads_the_database(tmp_path, monkeypatch):
    import sparsetir.tune  # noqa: F401 - registers the format="auto" resolver

    monkeypatch.setenv("SPARSETIR_TUNE_DATABASE", str(tmp_path / "db.jsonl"))
    monkeypatch.setenv("SPARSETIR_TUNE_BUDGET_S", "2")
    coords = random_cloud(200, 8, seed=11)
    kmap = kernel_map(coords)
    X, W = operands(len(coords), 27)
    assert_matches(sparse_conv3d(X, kmap, W, format="auto"), kmap, X, W)
    kernel = compile_sparse_conv3d(kmap, C_IN, C_OUT, format="auto")
    assert kernel.spec["format"] in {"CSF()", "RelCSR()"} or kernel.spec["format"].startswith(("ELL3D", "RTile"))
    database = tmp_path / "db.jsonl"
    recorded = database.read_bytes()
    again = compile_sparse_conv3d(kernel_map(coords), C_IN, C_OUT, format="auto")  # a fresh map: database hit
    assert again.spec["format"] == kernel.spec["format"]
    assert database.read_bytes() == recorded  # a hit: nothing tuned or recorded (not a wall-clock bound)
    assert isinstance(kmap, KernelMap) and "submanifold" in repr(kmap)
