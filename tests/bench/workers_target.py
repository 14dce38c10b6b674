"""A case step for tests/bench/test_workers.py: two numpy contenders timed interleaved, one record each.

Not a test module (no ``test_`` prefix): ``sparsetir.bench.workers`` imports it in its worker processes.
"""

from __future__ import annotations

import os

import numpy as np

from sparsetir.bench.records import make_record, write_json_atomic
from sparsetir.timing import TimingPolicy, time_interleaved, worker_share


def main(*, output, timing: dict, fail_in_worker: int | None = None) -> list[dict]:
    x = np.ones(1 << 16, dtype=np.float32)
    contenders = {"once": lambda: np.add(x, 1.0, out=x), "twice": lambda: np.add(np.add(x, 1.0, out=x), 1.0, out=x)}
    stats = time_interleaved(contenders, TimingPolicy.from_mapping(timing))
    share = worker_share()
    records = []
    for name, measured in stats.items():
        failing = share is not None and share[0] == fail_in_worker and name == "twice"
        records.append(make_record(
            experiment="spmm", op="spmm", device="cpu", dataset="toy", feat=1, contender=name,
            status="failed" if failing else "ok", reason="failed: on purpose" if failing else None,
            stats=None if failing else measured.to_dict(),
            provenance={"pid": os.getpid(), "share": list(share) if share else None}))
    write_json_atomic(output, records)
    return records
