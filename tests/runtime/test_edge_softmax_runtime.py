"""GAT's fused attention on exported kernels (``runtime.edge_softmax``): exported with a ``function``
spec, loaded and trained through with only the TVM runtime (a fresh process, tvm unimportable); the
CUDA set, built with nvcc, runs the same host code on the emulator; bad sets and specs are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from test_runtime_only import run_in_fresh_process

from sparsetir.backend.cuda import nvcc_available
from sparsetir.ops.edge_softmax import edge_softmax_aggregate as op
from sparsetir.ops.edge_softmax import edge_softmax_kernels
from sparsetir.runtime.edge_softmax import (
    EdgeSoftmaxStructure,
    backward,
    edge_softmax_aggregate,
    export_kernels,
    forward,
    load_kernels,
    with_self_loops,
)
from sparsetir.runtime.manifest import seal

HEADS, FEAT = 2, 4


def graph(m=30, n=20, seed=0):
    """A CSR structure with an empty row, a repeated edge and a self-loop rule applied."""
    A = sp.random(m, n, density=0.2, format="csr", random_state=seed)
    rows = np.repeat(np.arange(m), np.diff(A.indptr))
    rows, cols = np.concatenate([rows, [3, 3]]), np.concatenate([A.indices, [5, 5]])  # a repeated edge
    keep = rows != 7  # row 7 empty
    rows, cols = rows[keep], cols[keep]
    order = np.argsort(rows, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))])
    return with_self_loops(indptr, cols[order], 5)


def operands(n, m, nnz, dtype=torch.float64, seed=1):
    g = torch.Generator().manual_seed(seed)
    x, s, d = (torch.randn(*shape, generator=g, dtype=dtype) for shape in ((n, HEADS, FEAT), (n, HEADS), (m, HEADS)))
    mask = (torch.rand(nnz, HEADS, generator=g) > 0.4).to(dtype) / 0.6
    return x, s, d, mask


RUN_EXPORTED = """
import sys, numpy as np, torch
sys.modules["tvm"] = None  # as on a host without the compiler
from sparsetir.runtime.edge_softmax import EdgeSoftmaxStructure, edge_softmax_aggregate, load_kernels
kernels = load_kernels(sys.argv[1])
a = np.load(sys.argv[2])
structure = EdgeSoftmaxStructure.from_csr(a["indptr"], a["indices"], a["x"].shape[0])
x, s, d = (torch.from_numpy(a[k]).requires_grad_() for k in ("x", "s", "d"))
out, alpha = edge_softmax_aggregate(kernels, structure, x, s, d, torch.from_numpy(a["mask"]))
grads = torch.autograd.grad(out, (x, s, d), torch.from_numpy(a["g"]))
np.savez(sys.argv[3], out=out.detach().numpy(), alpha=alpha.numpy(), dx=grads[0], ds=grads[1], dd=grads[2])
assert "libtvm_compiler" not in open("/proc/self/maps").read(), "the TVM compiler was loaded"
print("ok")
"""


def test_an_exported_kernel_set_trains_with_only_the_runtime(tmp_path):
    indptr, indices = graph()
    m, n, nnz = indptr.shape[0] - 1, 20, indices.shape[0]
    x, s, d, mask = operands(n, m, nnz)
    x_, s_, d_ = (t.clone().requires_grad_() for t in (x, s, d))
    want, want_alpha = op(torch.from_numpy(indptr), torch.from_numpy(indices), x_, s_, d_, mask=mask)
    g = torch.randn_like(want)
    want_grads = torch.autograd.grad(want, (x_, s_, d_), g)
    paths = export_kernels(edge_softmax_kernels(HEADS, FEAT, dropout=True, dtype="float64"), tmp_path / "gat")
    assert sorted(p.name for p in (tmp_path / "gat").glob("*.so")) == ["aggregate.so", "backward.so", "forward.so"]
    spec = json.loads(paths["forward"].with_name("forward.so.json").read_text())["function"]
    assert spec == {"op": "edge_softmax", "kind": "forward", "heads": HEADS, "feat": FEAT, "dtype": "float64",
                    "negative_slope": 0.2, "dropout": True}
    np.savez(tmp_path / "in.npz", indptr=indptr, indices=indices, x=x, s=s, d=d, mask=mask, g=g)
    run = run_in_fresh_process(RUN_EXPORTED, tmp_path / "gat", tmp_path / "in.npz", tmp_path / "out.npz")
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
    got = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(got["out"], want.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["alpha"], want_alpha.numpy(), rtol=1e-12, atol=1e-12)
    for name, grad in zip(("dx", "ds", "dd"), want_grads):
        np.testing.assert_allclose(got[name], grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_bad_sets_and_operands_are_clear_errors(tmp_path):
    kernels = edge_softmax_kernels(HEADS, FEAT, dropout=False, dtype="float32")
    paths = export_kernels(kernels, tmp_path / "a")
    other = export_kernels(edge_softmax_kernels(HEADS, FEAT, negative_slope=0.1, dtype="float32"), tmp_path / "b")
    with pytest.raises(ValueError, match="negative_slope 0.1 differs"):
        load_kernels({**paths, "backward": other["backward"]})
    with pytest.raises(ValueError, match="is not the 'backward' function"):
        load_kernels({**paths, "backward": paths["forward"]})
    with pytest.raises(ValueError, match="missing"):
        load_kernels({"forward": paths["forward"]})
    manifest_path = paths["forward"].with_name("forward.so.json")
    manifest = json.loads(manifest_path.read_text())
    for change, problem in (({"heads": 0}, "must be an int >= 1"), ({"kind": "sideways"}, "must be one of"),
                            ({"extra": 1}, "is not part of the manifest's schema"),
                            ({"dropout": None}, "function.dropout' is missing")):
        spec = {**manifest["function"], **change}
        if change.get("dropout", 0) is None:
            del spec["dropout"]
        manifest_path.write_text(json.dumps(seal({**manifest, "function": spec})))
        with pytest.raises(ValueError, match=problem):
            load_kernels(tmp_path / "a")
    manifest_path.write_text(json.dumps(manifest))
    loaded = load_kernels(tmp_path / "a")
    indptr, indices = graph()
    structure = EdgeSoftmaxStructure.from_csr(indptr, indices, 20)
    x, s, d, mask = operands(20, structure.m, structure.nnz, torch.float32)
    with pytest.raises(ValueError, match="compiled without dropout"):
        edge_softmax_aggregate(loaded, structure, x, s, d, mask)
    with pytest.raises(ValueError, match=r"x must be \(20, 2, 4\)"):
        edge_softmax_aggregate(loaded, structure, x[:, :1], s, d)
    with pytest.raises(TypeError, match="runs in float32"):
        edge_softmax_aggregate(loaded, structure, x.double(), s, d)


@pytest.mark.skipif(not nvcc_available()[0], reason="nvcc is not installed")
def test_the_cuda_set_exports_loads_and_computes_the_same_on_the_emulator(tmp_path):
    from cuda_kernels import emulated_edge_softmax_set

    from sparsetir.backend.fatbin import fatbin_entries

    options = {"negative_slope": 0.2, "dropout": True}
    paths = export_kernels(edge_softmax_kernels(HEADS, FEAT, target="cuda", **options), tmp_path / "gat")
    loaded = load_kernels(tmp_path / "gat")  # no GPU needed to load: the library opens on the first call
    assert loaded.device == "cuda" and loaded.dropout and loaded.heads == HEADS
    assert ("ELF", "sm_90") in {(e.kind, e.arch) for e in fatbin_entries(paths["forward"])}
    emulated = emulated_edge_softmax_set(loaded)
    indptr, indices = graph(m=9, n=7, seed=4)
    structure = EdgeSoftmaxStructure.from_csr(indptr, indices, 7)
    x, s, d, mask = (t.float() for t in operands(7, structure.m, structure.nnz))
    out, alpha = forward(emulated, structure, x, s, d, mask)
    x_, s_, d_ = (t.double().requires_grad_() for t in (x, s, d))
    want, want_alpha = op(torch.from_numpy(indptr), torch.from_numpy(indices), x_, s_, d_, mask=mask.double())
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(alpha.numpy(), want_alpha.numpy(), rtol=1e-5, atol=1e-6)
    g = torch.randn(out.shape)
    got = backward(emulated, structure, x, s, d, mask, out, alpha, g)
    for name, a, b in zip(("d_x", "d_src", "d_dst"), got, torch.autograd.grad(want, (x_, s_, d_), g.double())):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
