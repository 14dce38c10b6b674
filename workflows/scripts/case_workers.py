"""A case step in the fresh worker processes its timing policy asks for (``timing.processes``).

The case steps (``run_case.py``, ``family_case.py``, ``attention_prunedbert.py``) end with
``run_step(__file__, main, kwargs, output=..., timing=...)``: with ``processes: 1`` the step's
``main`` runs here, as before; with more, ``sparsetir.bench.workers.run_in_workers`` runs it that
many times, each in a fresh Python process with its share of the samples, and writes the pooled
records (per-process medians kept in ``stats["processes"]``).
"""

from __future__ import annotations

from pathlib import Path


def worker_count(timing: dict | None) -> int:
    from sparsetir.timing import TimingPolicy

    return TimingPolicy.from_mapping(timing or {}).processes


def run_step(script: str, main, kwargs: dict, *, output: Path, timing: dict | None) -> list[dict]:
    """``main(**kwargs, output=output)``, in ``timing``'s worker processes when it asks for more than one."""
    count = worker_count(timing)
    if count == 1:
        return main(**kwargs, output=output)
    from sparsetir.bench.workers import run_in_workers

    script = Path(script).resolve()
    return run_in_workers(f"{script.stem}:main", kwargs, count, output=output, search_path=[str(script.parent)])
