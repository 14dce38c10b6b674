"""The default call (no ``out=``; the kernel's output pool) against ``out=``, side by side.

    python -m sparsetir.bench.output_pool [--dataset amazon_cs ...] [--feat 128 --feat 256]

For each (dataset, feature size) one compiled CSR SpMM kernel is timed interleaved, with a cache
flush before every call, two ways: ``kernel(B, out=C)`` into one preallocated array, and
``y = kernel(B)`` with the caller keeping the previous result until the next call (as a training
loop does), so the pool (``sparsetir/runtime/output_pool.py``) must hand back the other slot.
The last column is the default call's median over the ``out=`` call's (1.00 = no cost).
"""

from __future__ import annotations

import argparse

import numpy as np

from ..ops import compile_spmm
from ..timing import DEFAULT, time_interleaved
from .datasets import load_matrix

DATASETS = ("amazon_cs", "ca-condmat", "coauthor_cs", "dblp", "pubmed")
FEATS = (128, 256)


def compare(name: str, feat: int, samples: int = 40) -> dict:
    """Median seconds of ``out=`` and of the default call for one case, and the output's MiB."""
    A = load_matrix(name, 0)
    B = np.random.default_rng(0).random((A.shape[1], feat), dtype=np.float32)
    kernel = compile_spmm(A, feat)
    C = np.empty((A.shape[0], feat), np.float32)
    kept = {}

    def default_call():
        kept["y"] = kernel(B)  # the previous result is dropped only now

    stats = time_interleaved({"out": lambda: kernel(B, out=C), "default": default_call},
                             DEFAULT.replace(samples=samples, max_time_s=4.0))
    return {"dataset": name, "feat": feat, "out_mib": C.nbytes / 2**20,
            "out_s": stats["out"].median, "default_s": stats["default"].median}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", action="append", help=f"repeatable (default: {', '.join(DATASETS)})")
    parser.add_argument("--feat", action="append", type=int, help="repeatable (default: 128 and 256)")
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args(argv)
    print(f"{'dataset':14s} {'feat':>4s} {'out MiB':>7s} {'out= ms':>8s} {'default ms':>10s} {'default/out=':>12s}")
    for name in args.dataset or DATASETS:
        for feat in args.feat or FEATS:
            row = compare(name, feat, args.samples)
            print(f"{name:14s} {feat:4d} {row['out_mib']:7.1f} {row['out_s'] * 1e3:8.3f} "
                  f"{row['default_s'] * 1e3:10.3f} {row['default_s'] / row['out_s']:12.3f}", flush=True)


if __name__ == "__main__":
    main()
