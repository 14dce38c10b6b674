"""Bad input raises a clear ValueError/TypeError naming the problem before any kernel runs.

A bad argument (dtype, target, format, knob) is refused before anything compiles, so those
cases run in this process. Bad data (indices, lengths, shapes) would reach a compiled kernel if
its check were missing, and could crash the process there: those cases run in a separate
process, several to a process, each reporting its own outcome; a crash is pinned on the case
that was running and the cases after it go on in a fresh process.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.ops import compile_spmm, spmm

A = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
A.sort_indices()
B = np.ones((20, 8), np.float32)

REFUSED_BEFORE_COMPILING = {
    "unsupported B dtype": (lambda: spmm(A, np.ones((20, 8), np.int32)), TypeError, "int32 is not supported"),
    "int8 B": (lambda: spmm(A, np.ones((20, 8), np.int8)), TypeError, "int8 is not supported on cpu"),
    "bad accum_dtype": (lambda: spmm(A, np.ones((20, 8), np.float16), accum_dtype="float16"), ValueError,
                        "accum_dtype must be"),
    "complex values": (lambda: spmm(A.astype(np.complex64), B), TypeError, "cannot be cast"),
    "dense A": (lambda: spmm(A.toarray(), B), TypeError, "scipy.sparse matrix or a torch sparse tensor"),
    "1-D B": (lambda: spmm(A, np.ones(20, np.float32)), ValueError, "must be 2-D"),
    "feat 0": (lambda: compile_spmm(A, 0), ValueError, "feat must be >= 1"),
    "unknown format": (lambda: spmm(A, B, format="nosuch"), ValueError, "unknown format"),
    "unknown knob": (lambda: spmm(A, B, tile_rows=4), TypeError, "unknown cpu schedule knob"),
    "bad target": (lambda: spmm(A, B, target="opencl"), ValueError, "target must be"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_BEFORE_COMPILING))
def test_bad_argument_is_refused_before_anything_compiles(case):
    call, error, message = REFUSED_BEFORE_COMPILING[case]
    with pytest.raises(error, match=re.escape(message)) as caught:
        call()
    assert caught.type is error  # not merely a subclass


# The cases below run in a child process: SETUP, then each statement, one report line per case.

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

MAY_REACH_A_KERNEL = {
    "indptr not monotone": ("spmm(broken(indptr=A.indptr[[0, 5, 3] + list(range(3, 31))]), B)",
                            "ValueError", "non-decreasing"),
    "indptr of the wrong length": ("spmm(broken(indptr=A.indptr[:-1]), B)", "ValueError", "entries (rows + 1)"),
    "negative index": ("spmm(broken(indices=np.where(np.arange(A.nnz) == 3, -1, A.indices).astype(np.int32)), B)",
                       "ValueError", "negative index"),
    "index >= n": ("spmm(broken(indices=np.where(np.arange(A.nnz) == 3, 20, A.indices).astype(np.int32)), B)",
                   "ValueError", "out of range"),
    "nnz mismatch": ("spmm(broken(data=A.data[:-1]), B)", "ValueError", "nnz mismatch"),
    "shape mismatch": ("spmm(A, np.ones((19, 8), np.float32))", "ValueError", "has 19 rows"),
    "kernel operand of the wrong shape": ("compile_spmm(A, 8)(np.ones((20, 9), np.float32))",
                                          "ValueError", "expected (20, 8)"),
    "kernel values of the wrong length": ("compile_spmm(A, 8)(B, values=np.ones(3, np.float32))",
                                          "ValueError", "one per non-zero"),
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


REPORT = "bad-input case: "
BATTERY = SETUP + f"""
import json, sys
cases = json.loads(sys.argv[1])
setup = dict(globals())
for name, statement in cases:
    try:
        exec(statement, dict(setup))
    except Exception as caught:
        outcome = type(caught).__name__ + ": " + str(caught)
    else:
        outcome = "no error"
    print({REPORT!r} + json.dumps([name, outcome]), flush=True)
"""


def _text(output) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def run_battery(cases: dict[str, str], timeout_s: float = 300) -> dict[str, str]:
    """Case name -> "<ExceptionType>: <message>", "no error", or why its process died.

    The cases run in order in one process; when it dies, the case it was running gets the exit
    status and stderr, and the cases after it run in a fresh process.
    """
    outcomes: dict[str, str] = {}
    pending = list(cases)
    while pending:
        try:
            run = subprocess.run([sys.executable, "-c", BATTERY, json.dumps([[name, cases[name]] for name in pending])],
                                 capture_output=True, text=True, timeout=timeout_s)
            stdout, stderr, ended = run.stdout, run.stderr, f"the process crashed ({run.returncode})"
        except subprocess.TimeoutExpired as expired:
            stdout, stderr, ended = _text(expired.stdout), _text(expired.stderr), f"timed out after {timeout_s} s"
        for line in stdout.splitlines():
            if line.startswith(REPORT):
                name, outcome = json.loads(line[len(REPORT):])
                outcomes[name] = outcome
        unreported = [name for name in pending if name not in outcomes]
        if unreported:
            outcomes[unreported[0]] = f"{ended} in this case: {stderr[-2000:]}"
        pending = unreported[1:]
    return outcomes


@pytest.fixture(scope="module")
def battery_outcomes() -> dict[str, str]:
    return run_battery({name: statement for name, (statement, _, _) in MAY_REACH_A_KERNEL.items()})


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(MAY_REACH_A_KERNEL))
def test_bad_data_is_refused_before_any_kernel_runs(case, battery_outcomes):
    _, error, message = MAY_REACH_A_KERNEL[case]
    outcome = battery_outcomes[case]
    assert outcome.startswith(f"{error}: "), outcome
    assert message in outcome, outcome


@pytest.mark.slow
def test_a_crash_is_pinned_on_its_case_and_the_rest_still_run():
    outcomes = run_battery({"before": "spmm(A, B, format='coo')",
                            "crashes": "import os; os.abort()",
                            "after": "spmm(A, np.ones((19, 8), np.float32))"})
    assert outcomes["before"].startswith("ValueError: ") and "unknown format" in outcomes["before"]
    assert outcomes["crashes"].startswith("the process crashed (-6) in this case")
    assert outcomes["after"].startswith("ValueError: ") and "has 19 rows" in outcomes["after"]
