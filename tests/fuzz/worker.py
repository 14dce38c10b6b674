"""Run fuzz cases one after the other and report each as a JSON line (``driver.py`` runs this).

``python worker.py SEED FIRST COUNT [TARGET ...]``: case ``i`` (FIRST <= i < FIRST + COUNT) draws its
target and arguments from ``numpy.random.default_rng((SEED, i))``. A line ``{"case": i, "start": ...}``
is flushed before each case, so a case that kills the process by a signal is known; then one line with
its outcome: ``ok`` (a correct result), ``refused`` (a clear error), or ``finding`` (a raw exception or
a wrong result, with its text).
"""

from __future__ import annotations

import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from targets import CLEAR_ERRORS, TARGETS  # noqa: E402


def run_case(seed: int, case: int, names: list) -> dict:
    rng = np.random.default_rng((seed, case))
    name = names[int(rng.integers(len(names)))]
    try:
        call, check = TARGETS[name](rng)
        result = call()
    except CLEAR_ERRORS as error:
        return {"case": case, "target": name, "outcome": "refused", "detail": f"{type(error).__name__}: {error}"[:300]}
    except Exception as error:  # noqa: BLE001 - every other exception is a finding
        return {"case": case, "target": name, "outcome": "finding",
                "detail": f"raw {type(error).__name__}: {error}"[:300] + "\n" + traceback.format_exc()[-1500:]}
    try:
        check(result)
    except AssertionError as error:
        return {"case": case, "target": name, "outcome": "finding", "detail": f"wrong result: {error}"[:800]}
    return {"case": case, "target": name, "outcome": "ok"}


def main(argv) -> None:
    seed, first, count = (int(a) for a in argv[:3])
    names = argv[3:] or sorted(TARGETS)
    for case in range(first, first + count):
        print(json.dumps({"case": case, "start": True}), flush=True)
        print(json.dumps(run_case(seed, case, names)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
