"""Time hyb(c, buckets) host conversion from CSR (target: <= 0.3 s for ~1M non-zeros).

    python -m sparsetir.bench.hyb_conversion [--samples 7] [--col-parts 1 --col-parts 8]

Graphs: a synthetic power-law 200k x 200k matrix with about 1M non-zeros (seeded), and, when
``$SPARSETIR_DATA_MIRROR`` is set, the largest shared graph (``amazon_cs``). Each conversion
``Hyb(c).convert(A)`` starts from a canonical scipy CSR matrix and includes the validation,
the default bucket choice and every array the kernels index. Times go through the project's
one timer (``sparsetir.timing.time_cpu``, cache flush before every sample).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import scipy.sparse as sp

from ..data import load
from ..formats import Hyb
from ..timing import time_cpu

TARGET_S = 0.3


def power_law_matrix(rows: int = 200_000, nnz: int = 1_000_000, seed: int = 0) -> sp.csr_matrix:
    """A square matrix with Pareto row degrees (tail exponent 1.2, capped at rows / 20) and columns
    half uniform, half drawn by a Zipf popularity; duplicates summed (about ``nnz`` remain)."""
    rng = np.random.default_rng(seed)
    weights = rng.pareto(1.2, rows) + 1
    degree = np.minimum(np.round(weights / weights.sum() * nnz * 1.08).astype(np.int64), rows // 20)
    row_of = np.repeat(np.arange(rows), degree)
    popularity = 1.0 / np.arange(1, rows + 1)
    col_of = rng.permutation(rows)[rng.choice(rows, size=row_of.size, p=popularity / popularity.sum())]
    uniform = rng.random(row_of.size) < 0.5
    col_of[uniform] = rng.integers(0, rows, size=int(uniform.sum()))
    matrix = sp.csr_matrix((rng.uniform(-1, 1, row_of.size), (row_of, col_of)), shape=(rows, rows))
    matrix.sum_duplicates()
    return matrix


def graphs() -> dict:
    found = {"power-law 200k": power_law_matrix()}
    if os.environ.get("SPARSETIR_DATA_MIRROR"):
        found["amazon_cs"] = load("amazon_cs")
    return found


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--col-parts", type=int, action="append", dest="col_parts")
    args = parser.parse_args(argv)
    col_parts = args.col_parts or [1, 8]
    print(f"{'graph':<16} {'rows':>8} {'nnz':>9} {'c':>3} {'buckets':<24} "
          f"{'median s':>9} {'p20 s':>8} {'p80 s':>8}  target")
    for name, matrix in graphs().items():
        for c in col_parts:
            fmt = Hyb(c)
            buckets = fmt.resolve(matrix).buckets
            stats = time_cpu(lambda fmt=fmt, matrix=matrix: fmt.convert(matrix), warmup_s=0.0, min_warmup=1, samples=args.samples,
                             min_samples=args.samples)
            verdict = "ok" if stats.median <= TARGET_S else f"SLOW (> {TARGET_S} s)"
            widths = f"{buckets[0]}..{buckets[-1]} ({len(buckets)})"
            print(f"{name:<16} {matrix.shape[0]:>8} {matrix.nnz:>9} {c:>3} {widths:<24} "
                  f"{stats.median:>9.4f} {stats.p20:>8.4f} {stats.p80:>8.4f}  {verdict}")


if __name__ == "__main__":
    main()
