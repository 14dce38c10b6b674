"""A compile worker process: ``python -m sparsetir.tune.compile_worker <request.npz>``.

It reads the tuning problem (matrix arrays, op, feat, dtype, target) from the npz,
then one JSON candidate config per stdin line, compiles it into the disk kernel cache,
and answers one JSON line ``{"compile_s": ..., "error": ...}`` per candidate. Plain
subprocesses (not multiprocessing) so a caller's script needs no ``__main__`` guard.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def write_request(path, op: str, matrix, feat: int, dtype: str, target: dict) -> None:
    np.savez(path, indptr=matrix.indptr, indices=matrix.indices, data=matrix.data,
             shape=np.asarray(matrix.shape, dtype=np.int64),
             problem=np.asarray(json.dumps({"op": op, "feat": feat, "dtype": dtype, "target": target})))


def read_request(path):
    import scipy.sparse as sp

    with np.load(path, allow_pickle=False) as arrays:
        problem = json.loads(str(arrays["problem"]))
        matrix = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"]))
    return problem, matrix


def compile_candidate(problem: dict, matrix, config: dict) -> dict:
    import sparsetir

    compile_fn = sparsetir.compile_spmm if problem["op"] == "spmm" else sparsetir.compile_sddmm
    started = time.perf_counter()
    try:
        compile_fn(matrix, problem["feat"], target=problem["target"], dtype=problem["dtype"], **config)
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
