"""The tuner: search formats x knobs for one (op, matrix, feat, dtype, target), within a budget.

    result = sparsetir.tune.tune_spmm(A, 64, budget_s=30)
    kernel = sparsetir.compile_spmm(A, 64, **result.config)

Results go to the tuning database (``$SPARSETIR_CACHE_DIR/tune/database.jsonl``); a
second call with the same key returns the stored configuration without tuning.

A run is a pipeline of batches: the search proposes a batch (ranked by a cost model trained on
the database's measurements, ``cost_model.py``, once there are any), the compile workers build
it, and the tuning process loads, checks and times it. With ``overlap`` (the default) the next
batch compiles while the current one is timed, its workers at the lowest priority while the
timer samples (``Measurer.yielding_workers``). The finalists are re-timed with no compile running.
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
from .cost_model import CostModel
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
FINAL_SHARE = 0.1  # the search ends at this share of the budget before its end, kept for the finalists


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
    compiled: int = 0  # candidates the workers compiled without error
    kernels_built: int = 0  # ... of which built now (the others came from the kernel cache)
    measured: int = 0  # candidates that ran, matched the reference and were timed
    bound_s: float | None = None  # the caller's bound on this case's time (e.g. the bench's DRAM model)
    overlap: bool = False  # whether compiling overlapped timing
    cost_model: dict = field(default_factory=dict)  # what the cost model learnt from (CostModel.summary)
    phases_s: dict = field(default_factory=dict)  # seconds waiting for compiles, timing, proposing

    @property
    def speedup_over_default(self) -> float | None:
        """The default configuration's median over the best one's (same run)."""
        if self.median_s and self.default_median_s:
            return self.default_median_s / self.median_s
        return None

    @property
    def fraction_of_bound(self) -> float | None:
        """The bound's time over the best median (1.0: at the bound)."""
        if self.median_s and self.bound_s:
            return self.bound_s / self.median_s
        return None

    def report(self) -> str:
        """One line: candidates compiled (built, from the kernel cache) and measured, the default's, the
        best's and the bound's times."""
        def ms(seconds):
            return f"{seconds * 1e3:.3f} ms" if seconds else "n/a"
        line = (f"{self.compiled} compiled ({self.kernels_built} built, {self.compiled - self.kernels_built} from "
                f"the kernel cache), {self.measured} measured; default {ms(self.default_median_s)}, "
                f"best {ms(self.median_s)}")
        if self.speedup_over_default:
            line += f" ({self.speedup_over_default:.2f}x)"
        if self.bound_s:
            line += f", bound {ms(self.bound_s)} (best at {self.fraction_of_bound:.0%} of it)"
        return line

    def to_dict(self) -> dict:
        return {"op": self.op, "config": self.config, "median_s": self.median_s,
                "default_median_s": self.default_median_s, "key_hash": key_hash(self.key), "key": self.key,
                "tune_s": self.tune_s, "trials": self.trials, "strategy": self.strategy,
                "from_database": self.from_database, "compiled": self.compiled,
                "kernels_built": self.kernels_built, "measured": self.measured, "bound_s": self.bound_s,
                "speedup_over_default": self.speedup_over_default, "fraction_of_bound": self.fraction_of_bound,
                "overlap": self.overlap, "cost_model": self.cost_model, "phases_s": self.phases_s,
                "finalists": self.finalists, "measurements": self.measurements}


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
         seed: int = 0, cost_model: bool = True, overlap: bool = True, bound_s: float | None = None) -> TuneResult:
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
        Stop after this many seconds / measured candidates. The search stops proposing at
        ``1 - FINAL_SHARE`` of the seconds (the rest re-times the finalists, loaded from the
        kernel cache); a batch it is timing when that comes may overrun it.
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
    cost_model : bool
        Rank candidates with a model trained on the database's measurements (and this run's)
        before measuring them; without enough data to train on, the search is as with False.
    overlap : bool
        Compile the next batch while the current one is timed (the workers at the lowest priority
        while the timer samples). The next batch is then proposed before the current one's times
        are known.
    bound_s : float, optional
        A bound on this case's time (seconds), reported beside the best's.

    Returns
    -------
    TuneResult
        ``result.config`` is accepted by the op's compile function as keyword arguments.
    """
    if not isinstance(budget_s, (int, float)) or budget_s <= 0:
        raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")
    if trials is not None and (not isinstance(trials, int) or trials < 1):
        raise ValueError(f"trials must be a positive int or None, got {trials!r}")
    if bound_s is not None and (isinstance(bound_s, bool) or not isinstance(bound_s, (int, float))
                                or not bound_s > 0):
        raise ValueError(f"bound_s must be a positive number of seconds or None, got {bound_s!r}")
    matrix, feats, target, device, dtype, key = problem(op, A, feat, target, dtype)
    db = database if isinstance(database, TuningDatabase) else TuningDatabase(database)
    if use_database:
        stored = db.lookup(key)
        if stored is not None:
            _say(progress, f"[tune {op}] database hit: {stored['config']}")
            return _stored_result(op, key, stored, bound_s)
    if device != "cpu":
        raise RuntimeError(
            f"tuning measures candidates on this machine, which runs CPU (llvm) kernels only; for {device}, "
            "build a bundle (python -m sparsetir.bench.bundle build), time it on the GPU host and ingest the records")
    workers = usable_cores() if workers is None else max(1, int(workers))
    batch = batch or max(2, 2 * workers)
    started = time.perf_counter()
    space = search_space(op, matrix, device)
    model = CostModel.from_database(db, key) if cost_model else None
    search = Search(space, strategy, trials=trials, seed=seed, model=model)
    run = _Run(op, budget_s, trials, batch, started)
    measurer = Measurer(op, matrix, feats, dtype, target, workers=workers, seed=seed)
    learnt = model.summary() if model is not None else {}
    _say(progress, f"[tune {op}] {matrix.shape[0]:,}x{matrix.shape[1]:,} nnz {matrix.nnz:,} feat {'x'.join(map(str, feats))}: "
                   f"{space.size():,} candidates ({len(space.formats)} formats), {search.strategy}, "
                   f"budget {budget_s:g} s" + (f" / {trials} trials" if trials else "")
                   + (f"; cost model from {learnt['history_rows']} measurements of {learnt['records']} records"
                      if learnt.get("records") else "") + ("; overlapped compiles" if overlap else ""))
    try:
        pending = run.next_batch(search, measurer if overlap else None)
        while pending is not None:
            configs, handle = pending
            deadline = time.monotonic() + max(run.search_s - run.elapsed(), run.compile_floor())
            began = time.perf_counter()
            if handle is None:  # sequential: compile, then time
                results = measurer.measure(configs, deadline=deadline)
                run.phases["measure_s"] += time.perf_counter() - began
                pending = None
            else:  # overlapped: the next batch compiles while this one is timed
                compiled = measurer.collect(handle, deadline)
                run.phases["compile_wait_s"] += time.perf_counter() - began
                pending = run.next_batch(search, measurer) if run.has_time() else None
                began = time.perf_counter()
                results = measurer.time_compiled(configs, compiled)
                run.phases["measure_s"] += time.perf_counter() - began
            run.record(results, search)
            _say(progress, f"[tune {op}] {len(run.measured)} candidates in {run.elapsed():.1f} s; best "
                           + (f"{run.best.median_s * 1e3:.3f} ms {run.best.config}" if run.best else "none yet"))
            if run.elapsed() >= run.search_s:
                if pending is not None:  # still compiling at the end of the search's budget
                    run.dropped += len(pending[0])
                    measurer.abandon()
                break
            if not overlap:
                pending = run.next_batch(search, None)
        if run.best is None:
            errors = "; ".join(sorted({m.error for m in run.measured if m.error}))[:800]
            raise RuntimeError(f"no candidate compiled and ran correctly: {errors}")
        began = time.perf_counter()
        config, median, default_median, finalists = _final_pick(measurer, run.measured, space.default())
        run.phases["finalists_s"] = time.perf_counter() - began
    finally:
        measurer.close()
    tune_s = time.perf_counter() - started
    measured = run.measured
    result = TuneResult(op, config, median, default_median, key, [m.to_dict() for m in measured], tune_s,
                        len(measured), search.strategy, finalists=finalists,
                        compiled=sum(m.compiled is True for m in measured),
                        kernels_built=sum(m.built is True for m in measured),
                        measured=sum(m.median_s is not None for m in measured), bound_s=bound_s, overlap=overlap,
                        cost_model={**(model.summary() if model is not None else {}), "ranked": search.ranked},
                        phases_s={name: round(value, 3) for name, value in run.phases.items()})
    _say(progress, f"[tune {op}] done in {tune_s:.1f} s: {result.report()} with {config}"
                   + (f"; {run.dropped} still compiling at the end were dropped" if run.dropped else ""))
    db.add(key, config, median_s=median, source="tuned", default_median_s=default_median, tune_s=tune_s,
           trials=len(measured), strategy=search.strategy, measurements=result.measurements, finalists=finalists,
           compiled=result.compiled, kernels_built=result.kernels_built, measured=result.measured)
    return result


class _Run:
    """The bookkeeping of one tuning run: what was proposed and measured, the best so far, the budget."""

    def __init__(self, op: str, budget_s: float, trials: int | None, batch: int, started: float):
        self.op, self.budget_s, self.trials, self.batch, self.started = op, budget_s, trials, batch, started
        self.search_s = budget_s * (1 - FINAL_SHARE)  # the rest re-times the finalists
        self.proposed = self.dropped = 0
        self.measured: list[Measurement] = []
        self.best: Measurement | None = None
        self.phases = {"propose_s": 0.0, "compile_wait_s": 0.0, "measure_s": 0.0, "finalists_s": 0.0}

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def has_time(self) -> bool:
        """Whether the budget (seconds and trials) allows another batch."""
        return self.elapsed() < self.search_s and (self.trials is None or self.proposed < self.trials)

    def compile_floor(self) -> float:
        """The least time a batch gets to compile: more until a candidate has run."""
        return MIN_COMPILE_S if self.best is not None else FIRST_COMPILE_S

    def next_batch(self, search: Search, measurer: Measurer | None):
        """Propose the next batch: ``(configs, handle)``, or None when the budget or the search has nothing left.
        With a ``measurer``, the batch is handed to its compile workers at once (``handle``); else ``handle``
        is None and the caller measures it."""
        if not self.has_time():
            return None
        size = self.batch if self.trials is None else min(self.batch, self.trials - self.proposed)
        began = time.perf_counter()
        configs = search.propose(size)
        self.phases["propose_s"] += time.perf_counter() - began
        if not configs:
            return None
        self.proposed += len(configs)
        return configs, (measurer.submit(configs) if measurer is not None else None)

    def record(self, results: list[Measurement], search: Search) -> None:
        for result in results:
            self.measured.append(result)
            search.tell(result.config, result.median_s)
            if result.median_s is not None and (self.best is None or result.median_s < self.best.median_s):
                self.best = result


def _stored_result(op: str, key: dict, stored: dict, bound_s: float | None) -> TuneResult:
    """The TuneResult of a database hit (the counts as recorded, where the record has them)."""
    def count(name):
        value = stored.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return TuneResult(op, stored["config"], stored.get("median_s"), stored.get("default_median_s"), key,
                      stored.get("measurements", []), stored.get("tune_s") or 0.0, stored.get("trials", 0),
                      stored.get("strategy", ""), from_database=True, finalists=stored.get("finalists", []),
                      compiled=count("compiled"), kernels_built=count("kernels_built"), measured=count("measured"),
                      bound_s=bound_s)


def _final_pick(measurer: Measurer, measured: list[Measurement], default: dict):
    """Re-time the finalists and the default together: (winner, its median, the default's, the finalists)."""
    ranked = sorted((m for m in measured if m.median_s is not None), key=lambda m: m.median_s)
    finalists = [m.config for m in ranked[:FINALISTS]]
    default_ran = any(config_key(m.config) == config_key(default) and m.median_s is not None for m in measured)
    if default_ran and config_key(default) not in {config_key(c) for c in finalists}:
        finalists.append(default)
    # compiled already: they load from the kernel cache in this process, with no compile worker
    retimed = [m for m in measurer.time_compiled(finalists, timing=FINALISTS_TIMING) if m.median_s is not None]
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
