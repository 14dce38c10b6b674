"""A compile worker process: ``python -m sparsetir.tune.compile_worker <request.npz>``.

It reads the tuning problem (input arrays, op, feature sizes, dtype, target) from the npz,
then one JSON candidate config per stdin line, compiles it into the disk kernel cache,
and answers one JSON line ``{"compile_s": ..., "error": ..., "built": ...}`` per candidate.
``built`` says whether the kernel library was built now (False: it came from the kernel
cache, compiled earlier for this or another matrix; None: unknown). Plain subprocesses (not
multiprocessing) so a caller's script needs no ``__main__`` guard.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..ops import get_op
from .request import read_request


def compile_candidate(problem: dict, matrix, config: dict) -> dict:
    compile_fn = get_op(problem["op"]).compile
    started, wall = time.perf_counter(), time.time()
    try:
        kernel = compile_fn(matrix, *problem["feats"], target=problem["target"], dtype=problem["dtype"], **config)
    except Exception as error:  # reported per candidate; the search goes on
        return {"compile_s": time.perf_counter() - started, "error": f"{type(error).__name__}: {error}",
                "built": None}
    return {"compile_s": time.perf_counter() - started, "error": None, "built": built_since(kernel, wall)}


def built_since(kernel, wall: float) -> bool | None:
    """Whether ``kernel``'s library was written at or after ``wall`` (``time.time()``): built now, not
    taken from the kernel cache; None when the kernel does not say where its library lies."""
    library = getattr(getattr(kernel, "function", None), "library", None)
    if library is None:
        return None
    try:
        # a build takes far longer than the file clock's tick (which lags time.time() by up to one),
        # so a library written now is newer than ``wall``, and one from the cache older
        return Path(library).stat().st_mtime > wall
    except OSError:
        return None


def main(argv: list[str]) -> int:
    problem, matrix = read_request(argv[0])
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(compile_candidate(problem, matrix, json.loads(line))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
