"""A compile worker process: ``python -m sparsetir.tune.compile_worker <request.npz>``.

It reads the tuning problem (input arrays, op, feature sizes, dtype, target) from the npz,
then one JSON candidate config per stdin line, compiles it into the disk kernel cache,
and answers one JSON line ``{"compile_s": ..., "error": ...}`` per candidate. Plain
subprocesses (not multiprocessing) so a caller's script needs no ``__main__`` guard.
"""

from __future__ import annotations

import json
import sys
import time

from ..ops import get_op
from .request import read_request


def compile_candidate(problem: dict, matrix, config: dict) -> dict:
    compile_fn = get_op(problem["op"]).compile
    started = time.perf_counter()
    try:
        compile_fn(matrix, *problem["feats"], target=problem["target"], dtype=problem["dtype"], **config)
    except Exception as error:  # reported per candidate; the search goes on
        return {"compile_s": time.perf_counter() - started, "error": f"{type(error).__name__}: {error}"}
    return {"compile_s": time.perf_counter() - started, "error": None}


def main(argv: list[str]) -> int:
    problem, matrix = read_request(argv[0])
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(compile_candidate(problem, matrix, json.loads(line))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
