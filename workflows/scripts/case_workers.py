"""A case step in the fresh worker processes its timing policy asks for (``timing.processes``).

The case steps (``run_case.py``, ``family_case.py``) end with
``run_step(__file__, main, kwargs, output=..., timing=...)``: with ``processes: 1`` the step's
``main`` runs here, as before; with more, ``sparsetir.bench.workers.run_in_workers`` runs it that
many times, each in a fresh Python process with its share of the samples, and writes the pooled
records (per-process medians kept in ``stats["processes"]``). A step that passes ``preload`` (a
function importing what every worker needs, returning the threads this process may run and still
be forked: ``sparsetir.bench.workers.fork_workers``) pays the imports once: its workers are forked
from this process after ``preload()``, each still preparing, checking, warming up and timing its
contenders on its own.
"""

from __future__ import annotations

from pathlib import Path


def worker_count(timing: dict | None) -> int:
    from sparsetir.timing import TimingPolicy

    return TimingPolicy.from_mapping(timing or {}).processes


def run_step(script: str, main, kwargs: dict, *, output: Path, timing: dict | None, preload=None) -> list[dict]:
    """``main(**kwargs, output=output)``, in ``timing``'s worker processes when it asks for more than one
    (forked after ``preload()`` when given, else fresh interpreters)."""
    count = worker_count(timing)
    if count == 1:
        return main(**kwargs, output=output)
    from sparsetir.bench.workers import fork_workers, run_in_workers

    script = Path(script).resolve()
    target, search_path = f"{script.stem}:main", [str(script.parent)]
    if preload is not None:
        return fork_workers(main, kwargs, count, output=output, known_threads=preload(), fallback=target,
                            search_path=search_path)
    return run_in_workers(target, kwargs, count, output=output, search_path=search_path)
