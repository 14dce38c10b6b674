"""The runner's loop over one family's cases (its layers, its masks): each case in
turn while the time limit allows, its records appended to its file after every case (so a killed
run keeps what finished), a broken case recorded as failed without losing the others."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..case_runner import short_reason
from ..records import ALL_CONTENDERS, make_record, write_json_atomic


def row_times(row, candidate: dict | None) -> dict:
    """A record's ``times``: a candidate's conversion and compile (done on the build host) and its
    set-up here; for a baseline, its set-up (conversion included) as both."""
    if candidate is None:
        return {"convert_s": row.setup_s, "setup_s": row.setup_s}
    return {"convert_s": candidate.get("convert_s"), "compile_s": candidate.get("compile_s"), "setup_s": row.setup_s}


def run_cases_in_turn(cases: Iterable[dict], run_case: Callable[[dict], list[dict]], out: Path, *, family: str,
                      file_of: Callable[[dict], str], label_of: Callable[[dict], str],
                      failed: Callable[[dict, str], list[dict]], deadline_s: float,
                      say: Callable[[str], None]) -> list[str]:
    """Run ``run_case(case)`` for every case that fits before ``deadline_s`` (``time.monotonic()``),
    estimated from the slowest case so far; ``failed(case, reason)`` gives the records of a case that
    raised. Returns the record files (relative to ``out``), in order."""
    by_file: dict[str, list[dict]] = {}
    slowest = 0.0
    for case in cases:
        name, label = file_of(case), label_of(case)
        if time.monotonic() + 1.2 * slowest > deadline_s:
            say(f"{family}: stopping before {label}: the time limit would be passed")
            break
        started = time.monotonic()
        try:
            records = run_case(case)
        except Exception as error:  # one broken case must not lose the others
            records = failed(case, short_reason(f"{type(error).__name__}: {error}"))
        by_file.setdefault(name, []).extend(records)
        write_json_atomic(out / name, by_file[name])
        slowest = max(slowest, time.monotonic() - started)
        timed = [r for r in records if r["status"] == "ok"]
        fastest = min(timed, key=lambda r: r["stats"]["median"]) if timed else None
        say(f"{family} {label} ({time.monotonic() - started:.1f} s): "
            + (f"fastest {fastest['contender']} {fastest['stats']['median'] * 1e3:.3f} ms" if fastest
               else "nothing timed")
            + "".join(f"; {r['contender']} WRONG" for r in records if r["status"] == "wrong"))
    return list(by_file)


def failed_case(*, experiment: str, op: str, device: str, feat: int, where: dict,
                dataset_of: Callable[[dict], str] = lambda case: case["dataset"]) -> Callable[[dict, str], list[dict]]:
    """``failed(case, reason)`` for :func:`run_cases_in_turn`: one record for all contenders saying why."""
    def failed(case: dict, reason: str) -> list[dict]:
        return [make_record(experiment=experiment, op=op, device=device, dataset=dataset_of(case), feat=feat,
                            contender=ALL_CONTENDERS, status="failed", reason=reason, provenance=where)]

    return failed
