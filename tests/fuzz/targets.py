"""The fuzz targets: one generator of hostile arguments per public entry point, registered by name.

``TARGETS[name](rng) -> (call, check)``: ``call()`` runs the entry point on generated arguments
(out-of-range and negative indices, wrong dtypes and shapes, NaN/Inf, empty and one-element inputs,
non-contiguous views, tampered exports); ``check(result)`` raises AssertionError when the result is
wrong against the float64 reference. A case passes with a correct result or a clear ValueError /
TypeError / RuntimeError; any other exception, a wrong result or a signal is a finding. Every op in
``sparsetir.ops.registry`` must have a target here (``test_fuzz.py`` checks): a new op joins by
registering one with :func:`target`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

TARGETS: dict = {}
CLEAR_ERRORS = (ValueError, TypeError, RuntimeError, FileNotFoundError)


def target(name):
    def register(make):
        TARGETS[name] = make
        return make
    return register


def _matrix(rng, m=None, n=None):
    m = int(rng.choice([1, 2, 7, 33])) if m is None else m
    n = int(rng.choice([1, 3, 16, 40])) if n is None else n
    A = sp.random(m, n, density=float(rng.choice([0.0, 0.1, 0.5, 1.0])), format="csr", dtype=np.float32,
                  random_state=int(rng.integers(1 << 30)))
    if A.nnz and rng.random() < 0.3:  # hostile structure: an index out of range or negative, or int64
        A.indices = A.indices.copy()
        A.indices[int(rng.integers(A.nnz))] = int(rng.choice([-1, n, 2**31 - 1]))
    if rng.random() < 0.2:
        A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    return A


def _dense(rng, shape, dtype=np.float32):
    x = rng.standard_normal(shape).astype(dtype)
    if x.size and rng.random() < 0.3:
        x.reshape(-1)[int(rng.integers(x.size))] = rng.choice([np.nan, np.inf, -np.inf])
    if rng.random() < 0.15:  # a non-contiguous view of the same values
        x = np.asfortranarray(x) if x.ndim == 2 else x
    if rng.random() < 0.1:
        x = x.astype(rng.choice([np.float64, np.int32, np.float16]))
    if rng.random() < 0.1 and x.ndim:
        x = x[..., : max(x.shape[-1] - 1, 0)]  # a wrong shape
    return x


def _same(got, expected, atol=1e-3, exact_nan=True):
    """``got`` is ``expected``: the same shape, NaN and Inf where it has them, close elsewhere. With
    ``exact_nan=False`` (an infinite input to a sum whose order the op may choose: docs/nan-semantics.md)
    only the non-finite outputs must be the same ones (inf - inf is NaN in one order, inf in another)."""
    # a float16 result is rounded to float16 (inputs rounded too, float32 sums): two units in the last place
    rtol = 4e-3 if np.asarray(got).dtype == np.float16 else 1e-3
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    if rtol > 1e-3 and expected.size:
        atol = max(atol, rtol * float(np.abs(expected[np.isfinite(expected)]).max(initial=1.0)))
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if exact_nan:
        assert np.array_equal(np.isnan(got), np.isnan(expected)), "NaN pattern differs"
    finite = np.isfinite(expected)
    assert np.array_equal(np.isfinite(got), finite), "Inf pattern differs" if exact_nan else "non-finite pattern differs"
    np.testing.assert_allclose(got[finite], expected[finite], atol=atol, rtol=rtol)


def _valid(A) -> bool:
    return A.nnz == 0 or (A.indices.min() >= 0 and A.indices.max() < A.shape[1])


@target("spmm")
def spmm_case(rng):
    from sparsetir import ops  # noqa: PLC0415 - targets import the compiler in the worker only

    A = _matrix(rng)
    B = _dense(rng, (A.shape[1], int(rng.choice([1, 4, 8]))))
    fmt = str(rng.choice(["csr", "ell", "ell:2", "bsr:4", "dbsr:4", "srbcrs:4:4", "hyb"]))  # NaN/Inf in B too

    def check(C):
        _same(C, A.astype(np.float64) @ np.asarray(B, np.float64))
    return (lambda: ops.spmm(A, B, format=fmt)), check


@target("sddmm")
def sddmm_case(rng):
    from sparsetir import ops  # noqa: PLC0415

    A = _matrix(rng)
    k = int(rng.choice([1, 4, 8]))
    X, Y = _dense(rng, (A.shape[0], k)), _dense(rng, (A.shape[1], k))

    def check(C):
        coo = A.tocoo()
        dots = (np.asarray(X, np.float64)[coo.row] * np.asarray(Y, np.float64)[coo.col]).sum(1) * coo.data
        # a float16 result's data (tests/ops/test_mixed_precision.py), read without scipy's own methods, which
        # refuse float16 (make fuzz seed 0, case 4161)
        C = sp.csr_matrix((np.asarray(C.data, np.float64), C.indices, C.indptr), shape=C.shape)
        _same(C.tocoo().data if C.nnz == coo.nnz else C.data, dots)
    return (lambda: ops.sddmm(A, X, Y)), check


@target("sparse_attention")
def attention_case(rng):
    from sparsetir import ops  # noqa: PLC0415
    from sparsetir.reference.sparse_attention import attention_reference  # noqa: PLC0415

    blocks = int(rng.choice([1, 2, 3]))
    kind = rng.integers(4)
    layout = rng.random((blocks, blocks)) < 0.6
    if kind == 1:
        layout = sp.csr_matrix(layout.astype(np.float32))
        if layout.nnz:
            layout.indices = layout.indices.copy()
            layout.indices[0] = int(rng.choice([-1, blocks, 5]))
    elif kind == 2:
        layout = np.stack([layout, ~layout])
    seq = blocks * 16 - int(rng.choice([0, 0, 5]))
    heads = 2 if kind == 2 else int(rng.choice([1, 2]))
    q, k, v = (_dense(rng, (1, heads, seq, 8)) for _ in range(3))

    def check(out):
        _same(out, attention_reference(q, k, v, layout, 16))
    return (lambda: ops.sparse_attention(q, k, v, layout, block=16)), check


@target("rgms")
def rgms_case(rng):
    from sparsetir import ops  # noqa: PLC0415
    from sparsetir.formats.relational import read_relational_input  # noqa: PLC0415
    from sparsetir.reference.rgms import rgms_reference  # noqa: PLC0415

    n, R = int(rng.choice([1, 5, 20])), int(rng.choice([1, 3]))
    adj = [_matrix(rng, n, n) for _ in range(R)]
    X, W = _dense(rng, (n, 4)), _dense(rng, (R, 4, 3))
    fmt = str(rng.choice(["relcsr", "csf"]))

    def check(Y):  # the dataflow orders the sums (aggregate: (A_r X) W_r), so an infinity may give inf or NaN
        exact = not (np.isinf(np.asarray(X, np.float64)).any() or np.isinf(np.asarray(W, np.float64)).any())
        _same(Y, rgms_reference(read_relational_input(adj), X, W).reference, exact_nan=exact)
    return (lambda: ops.rgms(adj, X, W, format=fmt)), check


@target("conv")
def conv_case(rng):
    from sparsetir import ops  # noqa: PLC0415
    from sparsetir.reference.conv import conv_reference  # noqa: PLC0415

    points = rng.standard_normal((int(rng.choice([1, 5, 40])), 3)) * float(rng.choice([1, 10, 1e19]))
    voxel = float(rng.choice([0.5, 1.0, 1e-300]))
    holder = {}

    def call():
        coords, _ = ops.voxelize(points, voxel)
        kmap = ops.kernel_map(coords, kernel_size=3)
        features = _dense(rng, (coords.shape[0], 4))
        weight = _dense(rng, (27, 4, 2))
        holder.update(kmap=kmap, features=features, weight=weight, coords=coords)
        return ops.sparse_conv3d(features, kmap, weight)

    def check(out):
        assert holder["coords"].min() >= 0
        _same(out, conv_reference(holder["kmap"], holder["features"], holder["weight"]).reference)
    return call, check


@target("runtime.load")
def load_case(rng):
    from sparsetir import compile_spmm  # noqa: PLC0415
    from sparsetir.runtime import load  # noqa: PLC0415

    A = sp.random(20, 10, density=0.3, format="csr", dtype=np.float32, random_state=int(rng.integers(1 << 30)))
    folder = Path(tempfile.mkdtemp(prefix="fuzz-export-"))
    path = compile_spmm(A, 4).export(folder / "k.so")
    victim = Path(str(path) + str(rng.choice(["", ".json", ".npz"])))
    raw = bytearray(victim.read_bytes())
    how = rng.integers(3)
    if how == 0:
        raw = raw[: int(rng.integers(len(raw)))]
    elif how == 1:
        for _ in range(int(rng.integers(1, 4))):
            raw[int(rng.integers(len(raw)))] ^= int(rng.integers(1, 256))
    else:
        manifest = json.loads(Path(str(path) + ".json").read_text())
        manifest.pop(str(rng.choice(sorted(manifest))))
        raw = bytearray(json.dumps(manifest).encode())
        victim = Path(str(path) + ".json")
    victim.write_bytes(bytes(raw))
    B = np.ones((10, 4), np.float32)

    def check(C):
        _same(C, A.astype(np.float64) @ B)
    return (lambda: load(path)(B)), check


@target("data.parsers")
def parser_case(rng):
    from sparsetir.data import matrix_market  # noqa: PLC0415

    text = "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n3 2 2.0\n"
    raw = bytearray(text.encode())
    for _ in range(int(rng.integers(1, 4))):
        raw[int(rng.integers(len(raw)))] = int(rng.choice(list(b"0123456789 -\n.e%x")))
    folder = Path(tempfile.mkdtemp(prefix="fuzz-mtx-"))
    (folder / "m.mtx").write_bytes(bytes(raw))
    parse = matrix_market.read_matrix_market

    def check(result):
        pass  # any parsed matrix is what the file says; the parser must only never crash or raise raw errors
    return (lambda: parse(folder / "m.mtx")), check


# ------------------------------------------------------------------------------------------ compile_*
def _values(rng, nnz):
    """New values for a compiled kernel: right, NaN-holding, wrong length or wrong dtype."""
    values = rng.standard_normal(nnz).astype(np.float32)
    if nnz and rng.random() < 0.3:
        values[int(rng.integers(nnz))] = rng.choice([np.nan, np.inf, -0.0])
    if rng.random() < 0.15:
        values = values[: max(nnz - 1, 0)] if nnz else np.ones(1, np.float32)
    if rng.random() < 0.1:
        values = values.astype(rng.choice([np.float64, np.int64]))
    return values


@target("compile_spmm")
def compile_spmm_case(rng):
    from sparsetir import compile_spmm  # noqa: PLC0415

    A = _matrix(rng)
    feat = int(rng.choice([1, 4, 8]))
    fmt = str(rng.choice(["csr", "ell", "bsr:4", "hyb", "srbcrs:4:4", "dcsr"]))
    B = _dense(rng, (A.shape[1], feat))
    values = _values(rng, A.nnz) if rng.random() < 0.5 else None
    transpose_a = bool(rng.random() < 0.2)
    if transpose_a:
        B = _dense(rng, (A.shape[0], feat))

    def check(C):
        matrix = A.copy() if values is None else sp.csr_matrix((np.asarray(values, np.float64), A.indices, A.indptr),
                                                               shape=A.shape)
        if values is None:
            matrix.sum_duplicates()
        _same(C, (matrix.T if transpose_a else matrix).astype(np.float64) @ np.asarray(B, np.float64))
    return (lambda: compile_spmm(A, feat, format=fmt, transpose_a=transpose_a)(B, values=values)), check


@target("compile_sddmm")
def compile_sddmm_case(rng):
    from sparsetir import compile_sddmm  # noqa: PLC0415

    A = _matrix(rng)
    k = int(rng.choice([1, 4, 8]))
    fmt = str(rng.choice(["csr", "ell", "bsr:4", "hyb"]))
    X, Y = _dense(rng, (A.shape[0], k)), _dense(rng, (A.shape[1], k))
    values = _values(rng, A.nnz) if rng.random() < 0.5 else None

    def check(C):
        data = A.data if values is None else values
        rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
        dots = (np.asarray(X, np.float64)[rows] * np.asarray(Y, np.float64)[A.indices]).sum(1)
        data = np.asarray(data, np.float64)  # an infinite value multiplies each term (docs/nan-semantics.md)
        _same(np.asarray(C).reshape(-1), dots * data, exact_nan=not np.isinf(data).any())
    return (lambda: compile_sddmm(A, k, format=fmt)(X, Y, values=values)), check


@target("compile_sparse_attention")
def compile_attention_case(rng):
    from sparsetir import compile_sparse_attention  # noqa: PLC0415
    from sparsetir.reference.sparse_attention import attention_reference  # noqa: PLC0415

    blocks = int(rng.choice([1, 2, 3]))
    layout = rng.random((blocks, blocks)) < 0.6
    fmt = str(rng.choice(["bsr", "csr", "dbsr"]))
    head_dim = int(rng.choice([4, 8]))
    seq = blocks * 16 - int(rng.choice([0, 0, 3]))
    q, k, v = (_dense(rng, (int(rng.choice([1, 2])), 1, seq, head_dim)) for _ in range(3))

    def check(out):
        _same(out, attention_reference(q, k, v, layout, 16))
    return (lambda: compile_sparse_attention(layout, head_dim, block=16, format=fmt, seq=seq)(q, k, v)), check


@target("compile_rgms")
def compile_rgms_case(rng):
    from sparsetir import compile_rgms  # noqa: PLC0415
    from sparsetir.formats.relational import read_relational_input  # noqa: PLC0415
    from sparsetir.reference.rgms import rgms_reference  # noqa: PLC0415

    n, R = int(rng.choice([1, 5, 20])), int(rng.choice([1, 3]))
    adj = [_matrix(rng, n, n) for _ in range(R)]
    X, W = _dense(rng, (n, 4)), _dense(rng, (R, 4, 3))
    fmt = str(rng.choice(["relcsr", "csf"]))

    def check(Y):
        exact = not (np.isinf(np.asarray(X, np.float64)).any() or np.isinf(np.asarray(W, np.float64)).any())
        _same(Y, rgms_reference(read_relational_input(adj), X, W).reference, exact_nan=exact)
    return (lambda: compile_rgms(adj, 4, 3, format=fmt)(X, W)), check


@target("compile_sparse_conv3d")
def compile_conv_case(rng):
    from sparsetir import ops  # noqa: PLC0415
    from sparsetir.reference.conv import conv_reference  # noqa: PLC0415

    coords = np.unique(rng.integers(0, 5, (int(rng.choice([1, 8, 30])), 4)) * np.array([0, 1, 1, 1]), axis=0)
    kmap = ops.kernel_map(coords, kernel_size=int(rng.choice([1, 3])))
    c_in, c_out = 4, 2
    features = _dense(rng, (coords.shape[0], c_in))
    weight = _dense(rng, (kmap.kernel_volume if hasattr(kmap, "kernel_volume") else len(kmap.offsets), c_in, c_out))

    def check(out):
        _same(out, conv_reference(kmap, features, weight).reference)
    return (lambda: ops.compile_sparse_conv3d(kmap, c_in, c_out)(features, weight)), check


# ------------------------------------------------------------------------------------------ sparsetir.nn
def _edge_index(rng, n):
    import torch  # noqa: PLC0415

    edges = int(rng.choice([0, 1, 5, 40]))
    index = rng.integers(0, max(n, 1), (2, edges))
    if edges and rng.random() < 0.25:  # out of range or negative
        index[int(rng.integers(2)), int(rng.integers(edges))] = int(rng.choice([-1, n, 2**31]))
    tensor = torch.from_numpy(index)
    if rng.random() < 0.1:
        tensor = tensor.to(rng.choice([torch.int32, torch.float32]))
    if rng.random() < 0.1:
        tensor = tensor.t().contiguous().t()  # the same values, a non-contiguous view
    return tensor


def _features(rng, n, channels):
    import torch  # noqa: PLC0415

    return torch.from_numpy(_dense(rng, (n, channels)))


def _layer_case(rng, ours, theirs, args):
    """Our layer against PyG's with the same state_dict (the contract: PyG's keys and semantics)."""
    import torch  # noqa: PLC0415

    def call():
        theirs.load_state_dict(ours.state_dict())
        with torch.no_grad():
            return ours(*args)

    def check(out):
        with torch.no_grad():
            expected = theirs(*args)
        _same(out.detach().numpy(), expected.detach().double().numpy(), atol=1e-3)
    return call, check


@target("nn.SAGEConv")
def sage_case(rng):
    import torch_geometric.nn as pyg  # noqa: PLC0415

    from sparsetir import nn  # noqa: PLC0415

    n = int(rng.choice([1, 4, 12]))
    aggr = str(rng.choice(["mean", "sum", "max", "min"]))
    ours = nn.SAGEConv(4, 3, aggr=aggr)
    theirs = pyg.SAGEConv(4, 3, aggr=aggr)
    return _layer_case(rng, ours, theirs, (_features(rng, n, 4), _edge_index(rng, n)))


@target("nn.GATConv")
def gat_case(rng):
    import torch_geometric.nn as pyg  # noqa: PLC0415

    from sparsetir import nn  # noqa: PLC0415

    n = int(rng.choice([1, 4, 12]))
    heads, concat = int(rng.choice([1, 2])), bool(rng.random() < 0.5)
    loops = bool(rng.random() < 0.7)
    ours = nn.GATConv(4, 3, heads=heads, concat=concat, add_self_loops=loops)
    theirs = pyg.GATConv(4, 3, heads=heads, concat=concat, add_self_loops=loops)
    return _layer_case(rng, ours, theirs, (_features(rng, n, 4), _edge_index(rng, n)))


@target("nn.RGCNConv")
def rgcn_case(rng):
    import torch  # noqa: PLC0415
    import torch_geometric.nn as pyg  # noqa: PLC0415

    from sparsetir import nn  # noqa: PLC0415

    n, R = int(rng.choice([1, 4, 12])), int(rng.choice([1, 3]))
    aggr = str(rng.choice(["mean", "add"]))
    bases = int(rng.choice([0, 2]))
    kwargs = {"num_bases": bases} if bases else {}
    ours = nn.RGCNConv(4, 3, R, aggr=aggr, **kwargs)
    theirs = pyg.RGCNConv(4, 3, R, aggr=aggr, **kwargs)
    edge_index = _edge_index(rng, n)
    edge_type = torch.from_numpy(rng.integers(0, R, edge_index.shape[1]))
    if edge_type.numel() and rng.random() < 0.25:
        edge_type[int(rng.integers(edge_type.numel()))] = int(rng.choice([-1, R]))
    return _layer_case(rng, ours, theirs, (_features(rng, n, 4), edge_index, edge_type))


# ------------------------------------------------------------------------------------------ data parsers
def _npz_bytes(**arrays) -> bytes:
    import io  # noqa: PLC0415

    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _scipy_npz_bytes() -> bytes:
    import io  # noqa: PLC0415

    buffer = io.BytesIO()
    sp.save_npz(buffer, sp.random(4, 5, density=0.4, format="csr", random_state=0))
    return buffer.getvalue()


def _parser_samples():
    """(reader, a valid file's bytes, suffix) for every parser in sparsetir.data."""
    from sparsetir.data import (  # noqa: PLC0415
        gnn_benchmark_npz,
        graphdata_npz,
        kitti_bin,
        matrix_market,
        metis,
        ntriples,
        scipy_npz,
        smtx,
        snap_edge_list,
    )

    csr = sp.random(4, 4, density=0.5, format="csr", dtype=np.float32, random_state=1)
    return {
        "matrix_market": (matrix_market.read_matrix_market,
                          b"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n3 2 2.0\n", ".mtx"),
        "metis": (metis.read_metis, b"% tiny\n3 2\n2 3\n1\n1\n", ".graph"),
        "smtx": (smtx.read_smtx, b"3, 4, 4\n0 2 2 4\n3 1 0 3\n", ".smtx"),
        "edge_list": (snap_edge_list.read_edge_list, b"# c\n10\t30\n30 10\n10  700\n", ".txt"),
        "ntriples": (ntriples.read_ntriples, b"<a> <p> <b> .\n<b> <q> \"lit\" .\n<b> <p> <a> .\n", ".nt"),
        "kitti_bin": (kitti_bin.read_kitti_bin, np.arange(24, dtype=np.float32).tobytes(), ".bin"),
        "scipy_npz": (scipy_npz.read_scipy_npz, _scipy_npz_bytes(), ".npz"),
        "gnn_benchmark_npz": (gnn_benchmark_npz.read_gnn_benchmark_npz,
                              _npz_bytes(adj_data=csr.data, adj_indices=csr.indices, adj_indptr=csr.indptr,
                                         adj_shape=np.array(csr.shape)), ".npz"),
        "graphdata_npz": (graphdata_npz.read_graphdata_npz, _scipy_npz_bytes(), ".npz"),
    }


@target("data.parsers.all")
def every_parser_case(rng):
    samples = _parser_samples()
    name = sorted(samples)[int(rng.integers(len(samples)))]
    reader, data, suffix = samples[name]
    raw = bytearray(data)
    how = rng.integers(3)
    if how == 0 and raw:
        raw = raw[: int(rng.integers(len(raw)))]
    elif raw:
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(len(raw)))
            raw[at] = int(rng.integers(256)) if how == 1 else int(rng.choice(list(b"0123456789 -\n.e%x,<>\"")))
    folder = Path(tempfile.mkdtemp(prefix="fuzz-parse-"))
    (folder / f"f{suffix}").write_bytes(bytes(raw))

    def check(result):
        pass  # whatever parses is what the file says; a parser must never crash or raise a raw error
    return (lambda: reader(folder / f"f{suffix}")), check
