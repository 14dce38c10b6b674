"""The tuner: search formats x knobs for one (op, matrix, feat, dtype, target), within a budget.

    result = sparsetir.tune.tune_spmm(A, 64, budget_s=30)
    kernel = sparsetir.compile_spmm(A, 64, **result.config)

Results go to the tuning database (``$SPARSETIR_CACHE_DIR/tune/database.jsonl``); a
second call with the same key returns the stored configuration without tuning.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

from ..formats.inputs import input_kind
from ..ops import get_op
from ..ops.operands import resolve_dtype, target_and_device
from ..runtime.loader import usable_cores
from ..timing import FINALISTS as FINALISTS_TIMING
from .database import TuningDatabase, key_hash, tuning_key
from .measure import Measurement, Measurer
from .search import Search
from .space import config_key, search_space

DEFAULT_BUDGET_S = 60.0
AUTO_BUDGET_ENV = "SPARSETIR_TUNE_BUDGET_S"  # the budget of format="auto" on a database miss
DEFAULT_AUTO_BUDGET_S = 20.0
MIN_COMPILE_S = 10.0  # a batch always gets this long to compile, even at the end of the budget
# until one candidate has run, a batch gets this long: a cold kernel cache on a busy machine must
# not end a tuning run with nothing (the budget is then overrun, and the progress line says so)
FIRST_COMPILE_S = 120.0
FINALISTS = 3  # the best candidates are re-timed together, with more samples, to pick the winner


@dataclass
class TuneResult:
    """The best configuration found; ``compile_spmm(A, feat, **result.config)`` builds it."""

    op: str
    config: dict
    median_s: float | None
    default_median_s: float | None
    key: dict
    measurements: list[dict] = field(default_factory=list)
    tune_s: float = 0.0  # seconds the search took (for a database hit: when it was tuned)
    trials: int = 0
    strategy: str = ""
    from_database: bool = False
    finalists: list[dict] = field(default_factory=list)  # the re-timing that picked the winner

    @property
    def speedup_over_default(self) -> float | None:
        """The default configuration's median over the best one's (same run)."""
        if self.median_s and self.default_median_s:
            return self.default_median_s / self.median_s
        return None

    def to_dict(self) -> dict:
        return {"op": self.op, "config": self.config, "median_s": self.median_s,
                "default_median_s": self.default_median_s, "key_hash": key_hash(self.key), "key": self.key,
                "tune_s": self.tune_s, "trials": self.trials, "strategy": self.strategy,
                "from_database": self.from_database, "finalists": self.finalists, "measurements": self.measurements}


def tune_spmm(A, feat, *, target="llvm", budget_s: float = DEFAULT_BUDGET_S, **options) -> TuneResult:
    """Tune SpMM for A's structure and ``feat`` columns (see :func:`tune` for ``options``)."""
    return tune("spmm", A, feat, target=target, budget_s=budget_s, **options)


def tune_sddmm(A, feat, *, target="llvm", budget_s: float = DEFAULT_BUDGET_S, **options) -> TuneResult:
    """Tune SDDMM for A's structure and ``feat``-long rows in X and Y (see :func:`tune`)."""
    return tune("sddmm", A, feat, target=target, budget_s=budget_s, **options)


def problem(op: str, A, feat, target, dtype):
    """The validated input (in the form its kind gives the tuner: scipy CSR, ``RelationalMatrix``),
    the feature sizes, target dict, device, dtype and database key of a tuning problem."""
    spec = get_op(op)  # a ValueError naming the registered ops
    feats = spec.feature_args(feat)
    target, device = target_and_device(target)
    kind = input_kind(spec.input)
    matrix = kind.read(A)
    dtype = resolve_dtype(dtype, matrix.values.dtype, device)
    key_feat = feats[0] if len(feats) == 1 else list(feats)
    return kind.cast(matrix, dtype), feats, target, device, dtype, tuning_key(op, kind.fingerprint(matrix), key_feat,
                                                                                 dtype, target)


def tune(op: str, A, feat, *, target="llvm", budget_s: float = DEFAULT_BUDGET_S, trials: int | None = None,
         dtype=None, strategy: str = "auto", workers: int | None = None, batch: int | None = None,
         database: TuningDatabase | str | None = None, use_database: bool = True, progress: bool = True,
         seed: int = 0) -> TuneResult:
    """Search formats x knobs for the fastest ``op`` kernel on A, on this machine's CPU.

    Parameters
    ----------
    op : str
        A registered op (``sparsetir.ops.op_names()``).
    A : scipy.sparse matrix or torch sparse tensor
        The structure to tune for (validated; duplicates summed).
    feat : int
        The dense operands' feature size.
    target : str or dict
        An LLVM target (CUDA candidates are timed on a GPU host through a bundle).
    budget_s, trials : float, int
        Stop after this many seconds / measured candidates (the search may overrun the time
        by one batch).
    dtype : str, optional
        The kernel's value dtype (default: A's float dtype).
    strategy : str
        ``"exhaustive"``, ``"random"``, ``"evolutionary"`` or ``"auto"`` (exhaustive when the
        space fits in ``trials``).
    workers, batch : int, optional
        Compile processes (default: the usable cores) and candidates per round.
    database : TuningDatabase or str, optional
        Where results are looked up and recorded (default: ``$SPARSETIR_CACHE_DIR``).
    use_database : bool
        False always tunes (and still records).
    progress : bool
        Print progress to stderr.
    seed : int
        Seeds the search and the random operands.

    Returns
    -------
    TuneResult
        ``result.config`` is accepted by the op's compile function as keyword arguments.
    """
    if not isinstance(budget_s, (int, float)) or budget_s <= 0:
        raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")
    if trials is not None and (not isinstance(trials, int) or trials < 1):
        raise ValueError(f"trials must be a positive int or None, got {trials!r}")
    matrix, feats, target, device, dtype, key = problem(op, A, feat, target, dtype)
    db = database if isinstance(database, TuningDatabase) else TuningDatabase(database)
    if use_database:
        stored = db.lookup(key)
        if stored is not None:
            _say(progress, f"[tune {op}] database hit: {stored['config']}")
            return TuneResult(op, stored["config"], stored.get("median_s"), stored.get("default_median_s"), key,
                              stored.get("measurements", []), stored.get("tune_s") or 0.0, stored.get("trials", 0),
                              stored.get("strategy", ""), from_database=True, finalists=stored.get("finalists", []))
    if device != "cpu":
        raise RuntimeError(
            f"tuning measures candidates on this machine, which runs CPU (llvm) kernels only; for {device}, "
            "build a bundle (python -m sparsetir.bench.bundle build), time it on the GPU host and ingest the records")
    workers = usable_cores() if workers is None else max(1, int(workers))
    batch = batch or max(2, 2 * workers)
    space = search_space(op, matrix, device)
    search = Search(space, strategy, trials=trials, seed=seed)
    started = time.perf_counter()
    measured: list[Measurement] = []
    best: Measurement | None = None
    measurer = Measurer(op, matrix, feats, dtype, target, workers=workers, seed=seed)
    _say(progress, f"[tune {op}] {matrix.shape[0]:,}x{matrix.shape[1]:,} nnz {matrix.nnz:,} feat {'x'.join(map(str, feats))}: "
                   f"{space.size():,} candidates ({len(space.formats)} formats), {search.strategy}, "
                   f"budget {budget_s:g} s" + (f" / {trials} trials" if trials else ""))
    try:
        while time.perf_counter() - started < budget_s and (trials is None or len(measured) < trials):
            size = batch if trials is None else min(batch, trials - len(measured))
            configs = search.propose(size)
            if not configs:
                break
            floor = MIN_COMPILE_S if best is not None else FIRST_COMPILE_S
            deadline = time.monotonic() + max(budget_s - (time.perf_counter() - started), floor)
            for result in measurer.measure(configs, deadline=deadline):
                measured.append(result)
                search.tell(result.config, result.median_s)
                if result.median_s is not None and (best is None or result.median_s < best.median_s):
                    best = result
            _say(progress, f"[tune {op}] {len(measured)} candidates in {time.perf_counter() - started:.1f} s; best "
                           + (f"{best.median_s * 1e3:.3f} ms {best.config}" if best else "none yet"))
        if best is None:
            errors = "; ".join(sorted({m.error for m in measured if m.error}))[:800]
            raise RuntimeError(f"no candidate compiled and ran correctly: {errors}")
        config, median, default_median, finalists = _final_pick(measurer, measured, space.default())
    finally:
        measurer.close()
    tune_s = time.perf_counter() - started
    result = TuneResult(op, config, median, default_median, key, [m.to_dict() for m in measured], tune_s,
                        len(measured), search.strategy, finalists=finalists)
    _say(progress, f"[tune {op}] done in {tune_s:.1f} s: {median * 1e3:.3f} ms with {config}"
                   + (f" ({result.speedup_over_default:.2f}x over the default)" if result.speedup_over_default else ""))
    db.add(key, config, median_s=median, source="tuned", default_median_s=default_median, tune_s=tune_s,
           trials=len(measured), strategy=search.strategy, measurements=result.measurements, finalists=finalists)
    return result


def _final_pick(measurer: Measurer, measured: list[Measurement], default: dict):
    """Re-time the finalists and the default together: (winner, its median, the default's, the finalists)."""
    ranked = sorted((m for m in measured if m.median_s is not None), key=lambda m: m.median_s)
    finalists = [m.config for m in ranked[:FINALISTS]]
    default_ran = any(config_key(m.config) == config_key(default) and m.median_s is not None for m in measured)
    if default_ran and config_key(default) not in {config_key(c) for c in finalists}:
        finalists.append(default)
    retimed = [m for m in measurer.measure(finalists, FINALISTS_TIMING) if m.median_s is not None]
    if not retimed:  # the finalists failed on re-timing (should not happen): keep the search's numbers
        retimed = ranked[:1]
    winner = min(retimed, key=lambda m: m.median_s)
    default_result = next((m for m in retimed if config_key(m.config) == config_key(default)), None)
    return (winner.config, winner.median_s, default_result.median_s if default_result else None,
            [m.to_dict() for m in retimed])


def auto_config(op: str, A, feat, *, target="llvm", dtype=None) -> dict:
    """The configuration of ``format="auto"``: the database's, else tuned now (``$SPARSETIR_TUNE_BUDGET_S``)."""
    budget = float(os.environ.get(AUTO_BUDGET_ENV, DEFAULT_AUTO_BUDGET_S))
    return tune(op, A, feat, target=target, dtype=dtype, budget_s=budget).config


def _say(enabled: bool, message: str) -> None:
    if enabled:
        print(message, file=sys.stderr, flush=True)
