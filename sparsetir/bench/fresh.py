"""Ops on a stream of fresh structures, as in mini-batch training: every call a new sparse matrix.

    python -m sparsetir.bench.quick spmm --fresh-structures [--dataset pubmed] [--rows 1024 --rows 8192]

For each dataset and row count, a seeded stream of sub-matrices (``rows`` random rows of the
graph, all its columns) is built once. ``sparsetir.ops.spmm`` (which validates, converts and
binds each structure to the kernel compiled once for its (format, dtype, feat)) and scipy's
``A @ B`` then run over the same stream, interleaved by the one timer: each timed call takes the
next structure. The table gives the median time per call, non-zeros per call, and the ratio
(sparsetir's time over scipy's: below 1 is faster).
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp

from ..timing import DEFAULT, time_interleaved
from .datasets import load_matrix

DEFAULT_ROWS = (1024, 8192)
STREAM = 64  # structures per stream (the timer cycles through them)


def sample_rows(A: sp.csr_matrix, rows: int, count: int, seed: int) -> list[sp.csr_matrix]:
    """``count`` sub-matrices of ``rows`` distinct random rows of A (all columns), seeded."""
    rng = np.random.default_rng(seed)
    rows = min(rows, A.shape[0])
    return [A[np.sort(rng.choice(A.shape[0], rows, replace=False))] for _ in range(count)]


def stream_case(A: sp.csr_matrix, rows: int, feat: int, seed: int, spmm, timing=DEFAULT) -> dict:
    """Median seconds per call of ``spmm`` and of scipy on one stream, timed interleaved."""
    stream = sample_rows(A, rows, STREAM, seed)
    B = np.random.default_rng(seed).standard_normal((A.shape[1], feat), dtype=np.float32)
    check = stream[0]
    if not np.allclose(spmm(check, B), check @ B, rtol=1e-4, atol=1e-4):
        raise AssertionError("sparsetir's result differs from scipy's")
    ours, theirs = itertools.cycle(stream), itertools.cycle(stream)
    stats = time_interleaved({"sparsetir": lambda: spmm(next(ours), B), "scipy": lambda: next(theirs) @ B}, timing)
    return {"rows": rows, "nnz": int(np.median([s.nnz for s in stream])), "feat": feat,
            "sparsetir_s": stats["sparsetir"].median, "scipy_s": stats["scipy"].median,
            "ratio": stats["sparsetir"].median / stats["scipy"].median}


def main(datasets: list[str], rows: list[int], feats: list[int], seed: int, timing=DEFAULT) -> int:
    """Print one line per (dataset, rows, feat); returns 0 when every case ran."""
    from ..ops import spmm  # noqa: PLC0415 - the compiler loads after the CLI's thread settings (quick.main)

    print(f"{'dataset':<14}{'rows':>7}{'nnz/call':>10}{'feat':>6}{'sparsetir us':>14}{'scipy us':>11}{'ratio':>8}")
    failed = 0
    for dataset in datasets:
        try:
            A = load_matrix(dataset, seed)
        except Exception as error:  # a missing dataset is reported; the others run
            print(f"{dataset:<14} unavailable: {type(error).__name__}: {error}")
            failed += 1
            continue
        for count in rows:
            for feat in feats:
                case = stream_case(A, count, feat, seed, spmm, timing)
                print(f"{dataset:<14}{case['rows']:>7}{case['nnz']:>10,}{feat:>6}{case['sparsetir_s'] * 1e6:>14.1f}"
                      f"{case['scipy_s'] * 1e6:>11.1f}{case['ratio']:>8.2f}", flush=True)
    return 1 if failed else 0

