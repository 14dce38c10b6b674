"""Bad input raises a clear ValueError/TypeError naming the problem before any kernel runs.

Each case runs in its own process, so a crash (a segfault in a kernel fed bad indices)
fails the test instead of going unnoticed or killing the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SETUP = """
import numpy as np, scipy.sparse as sp
import sparsetir
from sparsetir.ops import spmm, sddmm, compile_spmm
A = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
A.sort_indices()
B = np.ones((20, 8), np.float32)
def broken(**changes):
    M = A.copy()
    for name, value in changes.items():
        setattr(M, name, value)
    return M
"""

CASES = {
    "indptr not monotone": ("spmm(broken(indptr=A.indptr[[0, 5, 3] + list(range(3, 31))]), B)",
                            "ValueError", "non-decreasing"),
    "indptr of the wrong length": ("spmm(broken(indptr=A.indptr[:-1]), B)", "ValueError", "entries (rows + 1)"),
    "negative index": ("spmm(broken(indices=np.where(np.arange(A.nnz) == 3, -1, A.indices).astype(np.int32)), B)",
                       "ValueError", "negative index"),
    "index >= n": ("spmm(broken(indices=np.where(np.arange(A.nnz) == 3, 20, A.indices).astype(np.int32)), B)",
                   "ValueError", "out of range"),
    "nnz mismatch": ("spmm(broken(data=A.data[:-1]), B)", "ValueError", "nnz mismatch"),
    "shape mismatch": ("spmm(A, np.ones((19, 8), np.float32))", "ValueError", "has 19 rows"),
    "unsupported B dtype": ("spmm(A, np.ones((20, 8), np.int32))", "TypeError", "int32 is not supported"),
    "float16 on the CPU": ("spmm(A, np.ones((20, 8), np.float16))", "TypeError", "float16 is not supported on cpu"),
    "complex values": ("spmm(A.astype(np.complex64), B)", "TypeError", "cannot be cast"),
    "dense A": ("spmm(A.toarray(), B)", "TypeError", "scipy.sparse matrix or a torch sparse tensor"),
    "1-D B": ("spmm(A, np.ones(20, np.float32))", "ValueError", "must be 2-D"),
    "feat 0": ("compile_spmm(A, 0)", "ValueError", "feat must be >= 1"),
    "kernel operand of the wrong shape": ("compile_spmm(A, 8)(np.ones((20, 9), np.float32))",
                                          "ValueError", "expected (20, 8)"),
    "kernel values of the wrong length": ("compile_spmm(A, 8)(B, values=np.ones(3, np.float32))",
                                          "ValueError", "one per non-zero"),
    "unknown format": ("spmm(A, B, format='coo')", "ValueError", "unknown format"),
    "unknown knob": ("spmm(A, B, tile_rows=4)", "TypeError", "unknown cpu schedule knob"),
    "bad target": ("spmm(A, B, target='opencl')", "ValueError", "target must be"),
    "sddmm operand rows": ("sddmm(A, np.ones((29, 4), np.float32), np.ones((20, 4), np.float32))",
                           "ValueError", "X needs 30 rows"),
    "generic function with an index out of range": (
        "from sparsetir import ir\n"
        "m, n, nnz = ir.size_vars('m n nnz')\n"
        "I = ir.dense_fixed('I', m); J = ir.sparse_variable('J', I, n, nnz); J_ = ir.dense_fixed('J_', n)\n"
        "V = ir.SparseBuffer('V', (I, J)); x = ir.SparseBuffer('x', (J_,)); y = ir.SparseBuffer('y', (I,))\n"
        "@ir.sparse_iteration([I, J], 'SR')\n"
        "def mv(i, j):\n"
        "    y[i] += V[i, j] * x[j]\n"
        "f = sparsetir.build(ir.SparseFunction('mv', [mv]))\n"
        "bad = A.indices.copy(); bad[0] = 10**6\n"
        "f(V=A.data, x=np.ones(20, np.float32), y=np.empty(30, np.float32), J_indptr=A.indptr, J_indices=bad)",
        "ValueError", "out of range"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_before_any_kernel_runs(case):
    statement, error, message = CASES[case]
    script = SETUP + textwrap.dedent(f"""
try:
{textwrap.indent(statement, '    ')}
except Exception as caught:
    print(type(caught).__name__ + ": " + str(caught))
else:
    print("no error")
""")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"the process crashed ({run.returncode}): {run.stderr[-2000:]}"
    assert run.stdout.strip().startswith(f"{error}: "), run.stdout + run.stderr[-2000:]
    assert message in run.stdout, run.stdout
