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
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if exact_nan:
        assert np.array_equal(np.isnan(got), np.isnan(expected)), "NaN pattern differs"
    finite = np.isfinite(expected)
    assert np.array_equal(np.isfinite(got), finite), "Inf pattern differs" if exact_nan else "non-finite pattern differs"
    np.testing.assert_allclose(got[finite], expected[finite], atol=atol, rtol=1e-3)


def _valid(A) -> bool:
    return A.nnz == 0 or (A.indices.min() >= 0 and A.indices.max() < A.shape[1])


@target("spmm")
def spmm_case(rng):
    from sparsetir import ops  # noqa: PLC0415 - targets import the compiler in the worker only

    A = _matrix(rng)
    B = _dense(rng, (A.shape[1], int(rng.choice([1, 4, 8]))))
    fmt = "csr" if not np.isfinite(np.asarray(B, np.float64)).all() else str(rng.choice(["csr", "ell", "bsr:4", "hyb"]))

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
