"""Quick CPU comparison: a compiled sparsetir kernel against every available CPU library.

    python -m sparsetir.bench.quick spmm --dataset pubmed --feat 32 --feat 64 [--samples 50]
    python -m sparsetir.bench.quick sddmm --dataset all-benchmark [--json out.json]
    python -m sparsetir.bench.quick spmm --dataset pubmed --tune 20   # plus a tuned contender
    python -m sparsetir.bench.quick spmm --dataset pubmed --locality-bound   # plus the CSR kernel
                                                      # on the same degrees with local columns

For every (dataset, feature size) each contender is prepared once (format conversion or
compilation, timed on its own), checked against a float64 scipy reference, then all of them
are timed together with ``time_interleaved`` (cache flush before every call). The table shows
medians, the speedup over the best CPU library (``best median / median``; > 1 is faster), and
the achieved fraction of copy bandwidth under a minimum-bytes model.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from baselines.scipy_sparse import canonical_csr
from sparsetir.bench.timer import Stats, default_flush_bytes, environment_info, time_cuda, time_interleaved
from sparsetir.runtime.loader import usable_cores
from sparsetir.runtime.validate import entry_rows

# Idle thread pools must go to sleep quickly. After each parallel region torch's OpenMP
# (libgomp) workers and TVM's pool busy-wait (default ~300k spins) for the next one; in an
# interleaved A/B run those spinning threads would hold the cores the next contender's threads
# need. Both are read once, when the library loads, so they are set before torch/tvm import.
SPIN_LIMITS = {"GOMP_SPINCOUNT": "10000", "TVM_THREAD_POOL_SPIN_COUNT": "1000"}
SPARSETIR = "sparsetir"
LOCALITY_BOUND = "bound: csr, local columns"
# The "best CPU library" a speedup is measured against: the sparse kernels, not dense GEMM.
LIBRARY_REFERENCES = {
    "spmm": ("scipy", "torch-csr-i64", "torch-csr-i32", "torch-reduce-sum", "pyg-edgeindex", "pyg-spmm", "dgl-gspmm"),
    "sddmm": ("scipy", "torch-sampled-addmm", "dgl-gsddmm"),
}
BASELINE_MODULES = ("baselines.scipy_sparse", "baselines.torch_sparse", "baselines.dense", "baselines.pyg",
                    "baselines.dgl_ops", "baselines.cupy_sparse")
# Entry-wise tolerance: TOLERANCE_ULPS * eps * sqrt(reduction length) * (|A| |B|), the
# statistical size of float32 rounding over a sum of that length, with a wide margin.
TOLERANCE_ULPS = 16.0
FLOAT32_EPS = float(np.finfo(np.float32).eps)


@dataclass
class Case:
    """One operation on one matrix: inputs, a float64 reference and its tolerance, bytes moved."""

    inputs: tuple[np.ndarray, ...]
    reference: np.ndarray
    tolerance: np.ndarray
    min_bytes: int


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
    timings: dict | None = None  # the sparsetir kernel's {"convert_s", "compile_s"}
    run: Callable[[], object] | None = field(default=None, repr=False)


# ---------------------------------------------------------------- datasets


def load_matrix(name: str, seed: int) -> sp.csr_matrix:
    """A float32 canonical CSR matrix: a generator spec (``synthetic:``, ``rmat:``, ``powerlaw:``;
    see :mod:`sparsetir.data.generators`) or a name from the dataset registry."""
    from sparsetir.data.generators import generate, is_generated

    if is_generated(name):
        return canonical_csr(generate(name, seed), np.float32)
    from sparsetir.data.registry import load

    return canonical_csr(load(name), np.float32)


def dataset_names(requested: list[str]) -> list[str]:
    names = []
    for name in requested:
        if name == "all-benchmark":
            from sparsetir.data.registry import benchmark_graphs

            names.extend(benchmark_graphs())
        else:
            names.append(name)
    return names


# ---------------------------------------------------------------- operations


def spmm_case(A: sp.csr_matrix, feat: int, rng: np.random.Generator) -> Case:
    """``C = A @ B`` for a random B."""
    return spmm_reference(A, rng.standard_normal((A.shape[1], feat), dtype=np.float32))


def spmm_reference(A: sp.csr_matrix, B: np.ndarray) -> Case:
    """``C = A @ B``; min bytes: values+indices, indptr, B and C each moved once (float32/int32)."""
    m, n = A.shape
    feat = B.shape[1]
    A64 = A.astype(np.float64)
    reference = A64 @ B.astype(np.float64)
    magnitude = abs(A64) @ np.abs(B.astype(np.float64))
    reduction = np.sqrt(np.diff(A.indptr) + 1.0)[:, None]
    tolerance = TOLERANCE_ULPS * FLOAT32_EPS * reduction * magnitude + 1e-30
    min_bytes = A.nnz * 8 + (m + 1) * 4 + n * feat * 4 + m * feat * 4
    return Case((B,), reference, tolerance, min_bytes)


def sddmm_case(A: sp.csr_matrix, feat: int, rng: np.random.Generator) -> Case:
    """``A.data * (X[i] . Y[j])`` for random X and Y."""
    m, n = A.shape
    X = rng.standard_normal((m, feat), dtype=np.float32)
    return sddmm_reference(A, X, rng.standard_normal((n, feat), dtype=np.float32))


def sddmm_reference(A: sp.csr_matrix, X: np.ndarray, Y: np.ndarray) -> Case:
    """``A.data * (X[i] . Y[j])``; min bytes: A (values+indices, indptr), X, Y and the output once."""
    m, n = A.shape
    feat = X.shape[1]
    rows, cols = entry_rows(A.indptr), A.indices
    values = A.data.astype(np.float64)
    X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
    reference = values * np.einsum("ij,ij->i", X64[rows], Y64[cols])
    magnitude = np.abs(values) * np.einsum("ij,ij->i", np.abs(X64[rows]), np.abs(Y64[cols]))
    tolerance = TOLERANCE_ULPS * FLOAT32_EPS * math.sqrt(feat + 1) * magnitude + 1e-30
    min_bytes = A.nnz * 8 + (m + 1) * 4 + m * feat * 4 + n * feat * 4 + A.nnz * 4
    return Case((X, Y), reference, tolerance, min_bytes)


def sparsetir_spmm(A: sp.csr_matrix, B: np.ndarray, *, format: str, **knobs) -> Callable[[], np.ndarray]:
    """``sparsetir.compile_spmm`` for A's structure, run into a preallocated C."""
    import sparsetir

    kernel = sparsetir.compile_spmm(A, B.shape[1], format=format, target="llvm", dtype=B.dtype.name, **knobs)
    out = np.empty((A.shape[0], B.shape[1]), dtype=B.dtype)

    def run():
        kernel(B, out=out)
        return out

    run.timings = dict(kernel.timings)
    return run


def sparsetir_sddmm(A: sp.csr_matrix, X: np.ndarray, Y: np.ndarray, *, format: str,
                    **knobs) -> Callable[[], np.ndarray]:
    """``sparsetir.compile_sddmm`` for A's structure, run into a preallocated value array."""
    import sparsetir

    kernel = sparsetir.compile_sddmm(A, X.shape[1], format=format, target="llvm", dtype=X.dtype.name, **knobs)
    out = np.empty(A.nnz, dtype=X.dtype)

    def run():
        kernel(X, Y, out=out)
        return out

    run.timings = dict(kernel.timings)
    return run


@dataclass(frozen=True)
class Operation:
    """How quick benchmarks one op: its case, its sparsetir kernel, the baselines' variant table."""

    make_case: Callable[[sp.csr_matrix, int, np.random.Generator], Case]
    reference: Callable[..., Case]  # the case for given inputs: (A, *inputs) -> Case
    sparsetir_kernel: Callable[..., Callable[[], np.ndarray]]
    variants_attr: str


OPS = {
    "spmm": Operation(spmm_case, spmm_reference, sparsetir_spmm, "SPMM_VARIANTS"),
    "sddmm": Operation(sddmm_case, sddmm_reference, sparsetir_sddmm, "SDDMM_VARIANTS"),
}


# ---------------------------------------------------------------- contenders


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


def host_array(result) -> np.ndarray:
    """A contender's result as a float64 numpy array (from numpy, torch on any device, or cupy)."""
    if hasattr(result, "detach"):  # torch
        result = result.detach().cpu().numpy()
    elif hasattr(result, "get") and not isinstance(result, np.ndarray):  # cupy
        result = result.get()
    return np.asarray(result, dtype=np.float64)


def result_mismatch(got: np.ndarray, case: Case) -> str | None:
    """None when ``got`` matches the reference within tolerance, else what is wrong."""
    if got.shape != case.reference.shape:
        return f"wrong result: shape {got.shape}, expected {case.reference.shape}"
    excess = np.abs(got - case.reference) - case.tolerance
    if not np.isfinite(got).all() or (excess > 0).any():
        worst = np.unravel_index(np.nanargmax(np.where(np.isfinite(excess), excess, np.inf)), got.shape)
        return (
            f"wrong result: at {tuple(int(i) for i in worst)} got {got[worst]:.6g}, "
            f"expected {case.reference[worst]:.6g} (tolerance {case.tolerance[worst]:.2g})"
        )
    return None


def contender_rows(
    op: str,
    A: sp.csr_matrix,
    case: Case,
    sparsetir_formats: str | Mapping[str, str | dict],
    exclude=(),
    *,
    baseline_modules: Sequence[str] = BASELINE_MODULES,
    device: str = "cpu",
    options: Mapping[str, Mapping] | None = None,
) -> list[Row]:
    """The sparsetir rows, then one row per variant of every baseline module (minus ``exclude``).

    ``sparsetir_formats`` maps a contender name to a format string or a configuration (see
    :func:`contender_config`; a plain string is one contender named ``sparsetir``).
    ``options`` maps a variant name to extra keyword arguments for its factory (e.g. ``{"torch-dense": {"limit_bytes": ...}}``); ``device`` is passed to
    baseline factories when it is not ``"cpu"``. A module that cannot be imported gives one
    ``unavailable`` row named after it.
    """
    operation = OPS[op]
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
                "exported bundle (shared/GPU.md); this process times CPU (llvm) kernels only")))
        else:
            row = prepare(Row(name, "compile"),
                          lambda config=config: operation.sparsetir_kernel(A, *case.inputs, **config), case)
            if row.timings is not None:
                row.timings["tune_s"] = tune_s
            rows.append(row)
    for module_name in baseline_modules:
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # a broken optional library must not stop the others
            rows.append(Row(module_name.rsplit(".", 1)[-1], "conversion",
                            error=f"unavailable: cannot import {module_name}: {type(error).__name__}: {error}"))
            continue
        ok, reason = module.available(op, device)
        for name, factory in getattr(module, operation.variants_attr).items():
            if name in exclude:
                continue
            row = Row(name, "conversion")
            if not ok:
                row.error = f"unavailable: {reason}"
                rows.append(row)
                continue
            kwargs = dict(options.get(name, {}))
            if device != "cpu":
                kwargs["device"] = device
            rows.append(prepare(row, lambda factory=factory, kwargs=kwargs: factory(A, *case.inputs, **kwargs), case))
    return rows


def locality_bound_row(op: str, A: sp.csr_matrix, case: Case, config: dict) -> Row:
    """The sparsetir kernel built with ``config`` for A with local columns (see
    :mod:`sparsetir.bench.locality`), run on the case's inputs and checked against that matrix's
    own reference: not a contender, a bound on how fast the kernel gets with perfect locality."""
    from sparsetir.bench.locality import local_columns

    operation = OPS[op]
    local = local_columns(A)
    return prepare(Row(LOCALITY_BOUND, "compile"),
                   lambda: operation.sparsetir_kernel(local, *case.inputs, **config),
                   operation.reference(local, *case.inputs))


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


_CUDA_TIMING_KEYS = ("warmup_s", "min_warmup", "samples", "max_time_s", "min_samples")


def time_rows(op: str, rows: list[Row], case: Case, copy_bytes_per_s: float, timing: dict,
              device: str = "cpu") -> None:
    """Time every runnable row, then fill in speedups and bandwidth fractions.

    On the CPU the rows are timed together (``time_interleaved``); on a GPU each row in turn
    with ``time_cuda`` (L2 flush, CUDA events).
    """
    runnable = {row.contender: row.run for row in rows if row.run is not None}
    if not runnable:
        return
    if device == "cpu":
        stats = time_interleaved(runnable, **timing)
    else:
        cuda_timing = {key: timing[key] for key in _CUDA_TIMING_KEYS if key in timing}
        stats = {name: time_cuda(run, **cuda_timing) for name, run in runnable.items()}
    for row in rows:
        row.stats = stats.get(row.contender)
    references = [row.stats.median for row in rows if row.stats and row.contender in LIBRARY_REFERENCES[op]]
    best = min(references) if references else None
    for row in rows:
        if row.stats is None:
            continue
        if best is not None:
            row.speedup_vs_best = best / row.stats.median
        row.dram_fraction = case.min_bytes / row.stats.median / copy_bytes_per_s


# ---------------------------------------------------------------- copy bandwidth


def measure_copy_bandwidth(timing: dict) -> dict:
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
    stats = time_interleaved(copies, **{**timing, "samples": min(timing["samples"], 30)})
    bandwidths = {name: 2 * size / s.median for name, s in stats.items()}
    best = max(bandwidths, key=bandwidths.get)
    return {"bytes": 2 * size, "bytes_per_s": bandwidths[best], "method": best, "all_bytes_per_s": bandwidths,
            "stats": {name: s.to_dict() for name, s in stats.items()}}


# ---------------------------------------------------------------- output

_HEADER = f"{'contender':<34}{'median ms':>11}{'p20 ms':>10}{'p80 ms':>10}{'mean ms':>10}{'n':>5}{'vs best':>9}{'setup ms':>10}{'DRAM':>7}"


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
        )
    return "\n".join(lines)


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
    }


# ---------------------------------------------------------------- CLI


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.quick", description=__doc__.split("\n\n")[0])
    parser.add_argument("op", choices=sorted(OPS))
    parser.add_argument("--dataset", action="append", required=True,
                        help="registry name, or all-benchmark for the benchmark graphs (repeatable)")
    parser.add_argument("--feat", action="append", type=int, help="feature size (repeatable; default 32 64 128 256)")
    parser.add_argument("--samples", type=int, default=100, help="timed calls per contender (default 100)")
    parser.add_argument("--max-time-s", type=float, default=30.0,
                        help="cap on the (estimated) sampling time per case; fewer samples, at least 10 (default 30)")
    parser.add_argument("--threads", type=int, default=usable_cores(),
                        help="threads for torch and TVM (default: all usable cores)")
    parser.add_argument("--format", action="append", dest="formats", metavar="FORMAT",
                        help="sparsetir format, e.g. csr, ell:32, bsr:4, hyb:1:1,2,4,8 (repeatable: one "
                             "sparsetir contender each, named sparsetir[FORMAT]; default csr, named sparsetir)")
    parser.add_argument("--tune", type=float, metavar="BUDGET_S",
                        help="also tune sparsetir for every case (this many seconds each, or a database hit) "
                             "and time the result as the contender sparsetir-tuned")
    parser.add_argument("--locality-bound", action="store_true",
                        help="also time the CSR kernel on the same matrix with local columns (same shape, "
                             "degrees and values; sparsetir.bench.locality): a bound on what scheduling reaches")
    parser.add_argument("--exclude", action="append", default=[], metavar="CONTENDER",
                        help="skip a contender, e.g. torch-dense (repeatable)")
    parser.add_argument("--no-flush", action="store_true", help="do not flush the cache between calls")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write records (stats, environment, setup times) to this file")
    args = parser.parse_args(argv)
    args.feat = args.feat or [32, 64, 128, 256]
    return args


def sparsetir_contenders(formats: list[str] | None) -> dict[str, str]:
    """Contender name -> format: plain ``sparsetir`` for the default CSR, ``sparsetir[fmt]`` otherwise."""
    if not formats or formats == ["csr"]:
        return {SPARSETIR: "csr"}
    return {f"{SPARSETIR}[{fmt}]": fmt for fmt in formats}


def tuned_contender(op: str, A: sp.csr_matrix, feat: int, budget_s: float, seed: int) -> dict:
    """The tuner's configuration for one case, as a contender spec (see :func:`contender_config`)."""
    from sparsetir.tune import tune

    try:
        result = tune(op, A, feat, budget_s=budget_s, seed=seed)
    except Exception as error:  # the other contenders still run; the row says why
        return {"error": f"unavailable: tuning: {type(error).__name__}: {error}"}
    return {"config": result.config, "tune_s": result.tune_s}


def configure_threads(threads: int) -> list[str]:
    """Set spin limits and thread counts (unless already set); must run before torch/tvm load.

    Returns warnings for libraries that were already loaded, for which the settings may not apply.
    """
    for name, value in {**SPIN_LIMITS, "OMP_NUM_THREADS": str(threads), "TVM_NUM_THREADS": str(threads)}.items():
        os.environ.setdefault(name, value)
    return [
        f"note: {module} was imported before the spin/thread settings; they may not apply to it"
        for module in ("torch", "tvm")
        if module in sys.modules
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for warning in configure_threads(args.threads):
        print(warning, file=sys.stderr)
    try:
        import torch
    except ImportError:
        torch = None
    else:
        torch.set_num_threads(args.threads)

    try:
        datasets = dataset_names(args.dataset)
    except Exception as error:
        print(f"dataset registry unavailable: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    timing = {"flush": not args.no_flush, "samples": args.samples, "max_time_s": args.max_time_s, "seed": args.seed}
    make_case = OPS[args.op].make_case
    copy = measure_copy_bandwidth(timing)
    flush_note = f"flush {default_flush_bytes() >> 20} MiB" if timing["flush"] else "no flush"
    print(
        f"{args.op}: {args.threads} threads, {flush_note}, copy bandwidth "
        f"{copy['bytes_per_s'] / 1e9:.1f} GB/s ({copy['method']})"
    )

    records, all_rows = [], []
    for dataset in datasets:
        try:
            A = load_matrix(dataset, args.seed)
        except Exception as error:
            print(f"\n{dataset}: unavailable: {type(error).__name__}: {error}")
            continue
        for feat in args.feat:
            case = make_case(A, feat, np.random.default_rng(args.seed))
            contenders = sparsetir_contenders(args.formats)
            if args.tune:
                contenders[f"{SPARSETIR}-tuned"] = tuned_contender(args.op, A, feat, args.tune, args.seed)
            rows = contender_rows(args.op, A, case, contenders, exclude=set(args.exclude))
            if args.locality_bound:
                rows.append(locality_bound_row(args.op, A, case, {"format": "csr"}))
            time_rows(args.op, rows, case, copy["bytes_per_s"], timing)
            print(f"\n{dataset} ({A.shape[0]:,} x {A.shape[1]:,}, {A.nnz:,} nnz), feat {feat}")
            print(format_rows(rows))
            all_rows.append(rows)
            records.extend(record(dataset, A, feat, case, row) for row in rows)
    print()
    print(geomean_line(all_rows))

    if args.json:
        document = {
            "op": args.op,
            "argv": sys.argv[1:] if argv is None else list(argv),
            "environment": environment_info(flush=timing["flush"]),
            "copy_bandwidth": copy,
            "records": records,
        }
        with open(args.json, "w") as handle:
            json.dump(document, handle, indent=1)
    return 0 if all_rows else 1


if __name__ == "__main__":
    sys.exit(main())
