"""Exported kernels load and run with only the TVM runtime, in a fresh process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp
from sparse_cases import random_dense

from sparsetir.ops import compile_sddmm, compile_spmm

RUN_EXPORTED = """
import sys, numpy as np
import sparsetir.runtime as runtime
kernel = runtime.load(sys.argv[1])
inputs = np.load(sys.argv[2])
out = kernel(*[inputs[name] for name in sorted(inputs.files)])
np.save(sys.argv[3], out)
maps = open("/proc/self/maps").read()
assert "libtvm_compiler" not in maps, "the TVM compiler was loaded"
assert sys.modules.get("tvm") is None, "the tvm package was imported"
print("ok")
"""


def run_in_fresh_process(script: str, *args, env_extra=None):
    import os

    env = dict(os.environ, TVM_USE_RUNTIME_LIB="1", **(env_extra or {}))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env)


def test_exported_spmm_runs_with_only_the_runtime(tmp_path):
    A = sp.random(300, 200, density=0.05, format="csr", dtype=np.float32, random_state=0)
    kernel = compile_spmm(A, 32)
    library = kernel.export(tmp_path / "spmm.so")
    assert {p.name for p in tmp_path.iterdir()} == {"spmm.so", "spmm.so.json", "spmm.so.npz", "spmm.so.ll"}
    B = random_dense(200, 32, np.float32)
    np.savez(tmp_path / "inputs.npz", B=B)
    run = run_in_fresh_process(RUN_EXPORTED, library, tmp_path / "inputs.npz", tmp_path / "out.npy")
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), A @ B, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_exported_sddmm_runs_with_only_the_runtime(tmp_path):
    A = sp.random(300, 200, density=0.05, format="csr", dtype=np.float32, random_state=1)
    library = compile_sddmm(A, 8).export(tmp_path / "sddmm.so")
    X, Y = random_dense(300, 8, np.float32, 2), random_dense(200, 8, np.float32, 3)
    np.savez(tmp_path / "inputs.npz", X=X, Y=Y)
    run = run_in_fresh_process(RUN_EXPORTED, library, tmp_path / "inputs.npz", tmp_path / "out.npy")
    assert run.returncode == 0, run.stderr
    rows = np.repeat(np.arange(300), np.diff(A.indptr))
    want = A.data * np.einsum("ij,ij->i", X[rows], Y[A.indices])
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_runtime_imports_without_the_tvm_compiler(tmp_path):
    """With ``tvm`` made unimportable, sparsetir.runtime still loads and runs a kernel."""
    A = sp.random(50, 40, density=0.1, format="csr", dtype=np.float64, random_state=4)
    library = compile_spmm(A, 4).export(tmp_path / "k.so")
    B = random_dense(40, 4, np.float64)
    np.savez(tmp_path / "inputs.npz", B=B)
    script = "import sys\nsys.modules['tvm'] = None  # any import of the compiler now fails\n" + RUN_EXPORTED
    run = run_in_fresh_process(script, library, tmp_path / "inputs.npz", tmp_path / "out.npy")
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), A @ B)
