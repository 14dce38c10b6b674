"""The benchmark engine: contenders prepared, checked against the op's reference and timed together.

For one case (an op on one matrix and feature size), :func:`contender_rows` prepares each
contender once (format conversion or compilation, timed on its own) and checks its result
against the float64 reference (``sparsetir.reference``); :func:`time_rows` then times every
runnable contender with the one timer (``sparsetir.timing``: interleaved with a cache flush
before every call on the CPU, CUDA events and an L2 flush on a GPU) and fills in the speedup
over the best CPU library and the fraction of copy bandwidth under the op's minimum-bytes
model. The quick benchmark (``quick.py``), the workflow's case runner (``case_runner.py``) and
the GPU bundle's runner (``bundle/runner.py``) all go through here.

It imports nothing from the compiler: sparsetir contenders come from a kernel factory the
caller passes (``OpSpec.benchmark_kernel``), so the bundle runner works with the TVM runtime only.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

import baselines

from ..reference import Case, get_reference, host_array, result_mismatch
from ..timing import Stats, TimingPolicy, default_flush_bytes, time_cuda, time_interleaved
from .locality import local_columns

SPARSETIR = "sparsetir"
# the same CSR kernel on the matrix with local columns (same degrees): what this kernel reaches
# when gathers hit the cache; a reference for scheduling, not a bound on the machine (bounds.py)
LOCALITY_BOUND = "csr on local columns"
KernelFactory = Callable[..., Callable[[], object]]  # (A, *inputs, format=..., **knobs) -> run


@dataclass
class Row:
    """One contender's outcome on one case."""

    contender: str
    setup_kind: str
    setup_s: float | None = None
    error: str | None = None
    stats: Stats | None = None
    speedup_vs_best: float | None = None
    dram_fraction: float | None = None
    bound_fraction: float | None = None  # the case's tighter measured bound over this row's median (bounds.py)
    timings: dict | None = None  # the sparsetir kernel's {"convert_s", "compile_s"}
    run: Callable[[], object] | None = field(default=None, repr=False)
    extra: dict = field(default_factory=dict, repr=False)  # what a family's check found (bench.family)


def prepare(row: Row, factory: Callable[[], Callable[[], object]], case: Case) -> Row:
    """Build ``row.run`` with ``factory`` (timed as setup) and check it against the reference."""
    start = time.perf_counter()
    try:
        run = factory()
    except Exception as error:  # any failure to build is reported in the row; the run goes on
        row.error = f"unavailable: {type(error).__name__}: {error}"
        return row
    row.setup_s = time.perf_counter() - start
    row.timings = getattr(run, "timings", None)
    try:
        got = host_array(run())
    except Exception as error:
        row.error = f"failed when called: {type(error).__name__}: {error}"
        return row
    row.error = result_mismatch(got, case)
    if row.error is None:
        row.run = run
    return row


def contender_rows(
    op: str,
    A: sp.csr_matrix,
    case: Case,
    sparsetir_formats: str | Mapping[str, str | dict],
    exclude=(),
    *,
    kernel_factory: KernelFactory | None = None,
    baseline_names: Sequence[str] | None = None,
    device: str = "cpu",
    options: Mapping[str, Mapping] | None = None,
) -> list[Row]:
    """The sparsetir rows, then one row per baseline variant of ``op`` (minus ``exclude``).

    ``sparsetir_formats`` maps a contender name to a format string or a configuration (see
    :func:`contender_config`; a plain string is one contender named ``sparsetir``), each built
    with ``kernel_factory(A, *inputs, format=..., **knobs)`` (the op's ``OpSpec.benchmark_kernel``).
    ``baseline_names``: library or variant names (``baselines.variants``; default: every library
    that declares ``op``). ``options`` maps a variant name to extra keyword arguments for its factory
    (e.g. ``{"torch-dense": {"limit_bytes": ...}}``); ``device`` is passed to baseline factories when it
    is not ``"cpu"``. A variant that cannot run on ``device`` here gives an ``unavailable`` row saying why.
    """
    if isinstance(sparsetir_formats, str):
        sparsetir_formats = {SPARSETIR: sparsetir_formats}
    options = options or {}
    rows = []
    for name, fmt in sparsetir_formats.items():
        if name in exclude:
            continue
        config, tune_s, error = contender_config(fmt)
        if error:
            rows.append(Row(name, "compile", error=error))
        elif device != "cpu":
            rows.append(Row(name, "compile", error=(
                f"unavailable: sparsetir kernels for {device} are built here and timed on the GPU host from an "
                "exported bundle (workflows/README.md); this process times CPU (llvm) kernels only")))
        elif kernel_factory is None:
            raise ValueError(f"contender {name!r}: a sparsetir contender needs a kernel_factory")
        else:
            row = prepare(Row(name, "compile"), lambda config=config: kernel_factory(A, *case.inputs, **config), case)
            if row.timings is not None:
                row.timings["tune_s"] = tune_s
            rows.append(row)
    chosen = baselines.variants(op, baselines.libraries_of(op) if baseline_names is None else baseline_names)
    for name, entry in chosen.items():
        if name not in exclude:
            rows.append(baseline_row(entry, case, device, options.get(name, {}), (A, *case.inputs)))
    return rows


def baseline_row(entry, case: Case, device: str = "cpu", options: Mapping | None = None,
                 inputs: Sequence | None = None, wrap: Callable | None = None) -> Row:
    """``entry`` (a ``baselines.Baseline``) built on ``inputs`` (default: the case's) and checked against
    ``case``; an ``unavailable`` row saying why when it cannot run on ``device`` here. ``wrap(run)``, when
    given, adapts the built ``run`` before the check (e.g. puts its rows in the reference's order)."""
    row = Row(entry.name, "conversion")
    ok, reason = entry.available(device)
    if not ok:
        row.error = f"unavailable: {reason}"
        return row
    arguments = case.inputs if inputs is None else inputs

    def factory():
        run = entry.build(*arguments, device=device, **dict(options or {}))
        return wrap(run) if wrap is not None else run

    return prepare(row, factory, case)


def locality_bound_row(op: str, A: sp.csr_matrix, case: Case, config: dict, kernel_factory: KernelFactory) -> Row:
    """The sparsetir kernel built with ``config`` for A with local columns (see
    :mod:`sparsetir.bench.locality`), run on the case's inputs and checked against that matrix's
    own reference: not a contender, a bound on how fast the kernel gets with perfect locality."""
    local = local_columns(A)
    return prepare(Row(LOCALITY_BOUND, "compile"),
                   lambda: kernel_factory(local, *case.inputs, **config),
                   get_reference(op).reference(local, *case.inputs))


def contender_config(value) -> tuple[dict | None, float | None, str | None]:
    """A sparsetir contender's (compile config, tuning seconds, error) from its spec.

    The spec is a format string, a configuration dict (``{"format": ..., **knobs}``), or a
    tuning outcome ``{"config": {...}, "tune_s": ...}`` / ``{"error": "..."}``.
    """
    if isinstance(value, str):
        return {"format": value}, None, None
    if "error" in value:
        return None, None, value["error"]
    if "config" in value:
        return dict(value["config"]), value.get("tune_s"), None
    return dict(value), None, None


def variant_name(value) -> str | None:
    """A contender spec as one line: the format, then the knobs that differ from the defaults."""
    config, _, _ = contender_config(value)
    if config is None:
        return None
    knobs = " ".join(f"{k}={v}" for k, v in sorted(config.items()) if k != "format" and v not in (None, False))
    return f"{config['format']} {knobs}".strip()


def time_rows(op: str, rows: list[Row], case: Case, copy_bytes_per_s: float, timing: TimingPolicy,
              device: str = "cpu", bounds: dict | None = None) -> None:
    """Time every runnable row, then fill in speedups, bandwidth fractions and (given the case's
    ``bounds.case_bounds``) the fraction of the tighter measured bound.

    On the CPU the rows are timed together (``time_interleaved``); on a GPU each row in turn
    with ``time_cuda`` (L2 flush, CUDA events). The speedup is over the fastest of the op's
    library references (``baselines.library_references``).
    """
    runnable = {row.contender: row.run for row in rows if row.run is not None}
    if not runnable:
        return
    if device == "cpu":
        stats = time_interleaved(runnable, timing)
    else:
        stats = {name: time_cuda(run, timing) for name, run in runnable.items()}
    for row in rows:
        row.stats = stats.get(row.contender)
    libraries = baselines.library_references(op)
    references = [row.stats.median for row in rows if row.stats and row.contender in libraries]
    best = min(references) if references else None
    for row in rows:
        if row.stats is None:
            continue
        if best is not None:
            row.speedup_vs_best = best / row.stats.median
        row.dram_fraction = case.min_bytes / row.stats.median / copy_bytes_per_s
        if bounds:
            row.bound_fraction = bounds["tight_s"] / row.stats.median


# ---------------------------------------------------------------- copy bandwidth


def measure_copy_bandwidth(timing: TimingPolicy) -> dict:
    """Copy bandwidth through the same timer: a copy of 2x LLC (bytes = read + write).

    Single-threaded ``np.copyto`` and torch's multi-threaded ``copy_`` are both timed; the
    faster one is the reference, so a bandwidth fraction is against what the machine reaches.
    """
    size = default_flush_bytes()
    source, target = np.ones(size, dtype=np.uint8), np.empty(size, dtype=np.uint8)
    copies = {"np.copyto": lambda: np.copyto(target, source)}
    torch = sys.modules.get("torch")
    if torch is not None:
        source_t, target_t = torch.from_numpy(source), torch.from_numpy(target)
        copies[f"torch copy_ ({torch.get_num_threads()} threads)"] = lambda: target_t.copy_(source_t)
    stats = time_interleaved(copies, timing, samples=min(timing.samples, 30))
    bandwidths = {name: 2 * size / s.median for name, s in stats.items()}
    best = max(bandwidths, key=bandwidths.get)
    return {"bytes": 2 * size, "bytes_per_s": bandwidths[best], "method": best, "all_bytes_per_s": bandwidths,
            "stats": {name: s.to_dict() for name, s in stats.items()}}


_HEADER = (f"{'contender':<34}{'median ms':>11}{'p20 ms':>10}{'p80 ms':>10}{'mean ms':>10}{'n':>5}{'vs best':>9}"
           f"{'setup ms':>10}{'DRAM':>7}{'% bound':>9}")


def format_rows(rows: list[Row]) -> str:
    lines = [_HEADER]
    for row in rows:
        if row.stats is None:
            lines.append(f"{row.contender:<34}{row.error}")
            continue
        s = row.stats
        speedup = _ratio(row.speedup_vs_best)
        lines.append(
            f"{row.contender:<34}{s.median * 1e3:>11.3f}{s.p20 * 1e3:>10.3f}{s.p80 * 1e3:>10.3f}"
            f"{s.mean * 1e3:>10.3f}{s.n:>5}{speedup:>9}{row.setup_s * 1e3:>10.1f}{row.dram_fraction:>7.2f}"
            + (f"{100 * row.bound_fraction:>8.0f}%" if row.bound_fraction else f"{'-':>9}")
        )
    return "\n".join(lines)


def interference_line(rows: list[Row]) -> str:
    """The case's rounds as the sentinel judged them (``Stats.interference``; the contenders share them)."""
    account = next((row.stats.interference for row in rows if row.stats is not None and row.stats.interference), None)
    if not account:
        return "rounds: not judged"
    reasons = ", ".join(f"{name} {count}" for name, count in account.get("reasons", {}).items() if count)
    text = (f"rounds: {account['kept']} kept of {account['rounds']}; {account['flagged']} flagged"
            + (f" ({reasons})" if reasons else "") + f", {account['repeated']} repeated")
    return text + ("; CONTAMINATED: more flagged rounds than the repeat bound" if account["contaminated"] else "")


def _ratio(value: float | None) -> str:
    if not value:
        return "-"
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def geomean_line(all_rows: list[list[Row]]) -> str:
    """Geomean, over cases, of each contender's speedup over the best CPU library."""
    if not all_rows:
        return "geomean: no case was timed"
    speedups: dict[str, list[float]] = {}
    for rows in all_rows:
        for row in rows:
            speedups.setdefault(row.contender, [])
            if row.speedup_vs_best:
                speedups[row.contender].append(row.speedup_vs_best)
    parts = [
        f"{name} {_ratio(math.exp(sum(map(math.log, values)) / len(values)))}" if values else f"{name} n/a"
        for name, values in speedups.items()
    ]
    return f"geomean speedup vs best CPU library over {len(all_rows)} case(s): " + ", ".join(parts)


def record(dataset: str, A: sp.csr_matrix, feat: int, case: Case, row: Row) -> dict:
    return {
        "dataset": dataset,
        "shape": list(A.shape),
        "nnz": int(A.nnz),
        "feat": feat,
        "contender": row.contender,
        "ok": row.stats is not None,
        "error": row.error,
        "setup_kind": row.setup_kind,
        "setup_s": row.setup_s,
        "timings": row.timings,
        "stats": row.stats.to_dict() if row.stats else None,
        "speedup_vs_best": row.speedup_vs_best,
        "min_bytes": case.min_bytes,
        "dram_fraction": row.dram_fraction,
        "bound_fraction": row.bound_fraction,
    }
