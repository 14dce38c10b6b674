"""A case step runs in the worker processes its timing asks for (``scripts/case_workers.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from case_workers import run_step, worker_count

TARGET = Path(__file__).resolve().parents[1] / "bench" / "workers_target.py"
TIMING = {"flush": False, "samples": 6, "max_time_s": 1.0, "min_samples": 2, "warmup_s": 0.0, "min_warmup": 1}


def test_one_process_runs_main_here_and_more_run_fresh_workers(tmp_path):
    calls = []

    def main(**kwargs):
        calls.append(kwargs)
        return []

    assert run_step(str(TARGET), main, {"timing": TIMING}, output=tmp_path / "a.json", timing=TIMING) == []
    assert calls == [{"timing": TIMING, "output": tmp_path / "a.json"}]
    split = {**TIMING, "processes": 2}
    assert worker_count(split) == 2 and worker_count(None) == 1
    records = run_step(str(TARGET), main, {"timing": split}, output=tmp_path / "b.json", timing=split)
    assert len(calls) == 1  # not called here: the workers imported the script's own main
    assert [len(r["stats"]["processes"]) for r in records] == [2, 2]
    assert json.loads((tmp_path / "b.json").read_text()) == records
