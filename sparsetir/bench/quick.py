"""Quick CPU comparison: a compiled sparsetir kernel against every available CPU library.

    python -m sparsetir.bench.quick spmm --dataset pubmed --feat 32 --feat 64 [--samples 50]
    python -m sparsetir.bench.quick sddmm --dataset all-benchmark [--json out.json]
    python -m sparsetir.bench.quick spmm --dataset pubmed --tune 20   # plus a tuned contender
    python -m sparsetir.bench.quick spmm --dataset pubmed --locality-bound   # plus the CSR kernel
                                                      # on the same degrees with local columns
    python -m sparsetir.bench.quick spmm --dataset pubmed --fresh-structures  # a new matrix every
                                                      # call (sparsetir.bench.fresh)
    python -m sparsetir.bench.quick spmm --dataset pubmed --precision  # float16/bfloat16 against
                                                      # float32 (sparsetir.bench.precision)

For every (dataset, feature size) each contender is prepared once (format conversion or
compilation, timed on its own), checked against a float64 reference, then all of them are
timed together (``sparsetir.bench.engine``: cache flush before every call). The table shows
medians, the speedup over the best CPU library (``best median / median``; > 1 is faster), the
achieved fraction of copy bandwidth under a minimum-bytes model, and the percentage of the
case's tighter measured bound (DRAM bytes, gathered bytes, flops: ``sparsetir.bench.bounds``).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import scipy.sparse as sp

from ..reference import get_reference, reference_names
from ..runtime.loader import usable_cores
from ..timing import DEFAULT, MachineBusyError, default_flush_bytes, environment_info, require_quiet_machine
from . import fresh, precision
from .bounds import case_bounds, measure_machine
from .datasets import dataset_names, load_matrix
from .engine import (
    LOCALITY_BOUND,
    SPARSETIR,
    contender_rows,
    format_rows,
    geomean_line,
    interference_line,
    locality_bound_row,
    measure_copy_bandwidth,
    record,
    time_rows,
)
from .threads import configure_threads

__all__ = ["LOCALITY_BOUND", "main", "parse_args", "sparsetir_contenders"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.quick", description=__doc__.split("\n\n")[0])
    parser.add_argument("op", choices=sorted(reference_names()))
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
                             "degrees and values; sparsetir.bench.locality): what this kernel reaches when its "
                             "gathers hit the cache (a reference, not a bound on the machine)")
    parser.add_argument("--fresh-structures", action="store_true",
                        help="spmm on a stream of fresh sub-matrices (random rows of each dataset), one per call, "
                             "against scipy on the same stream (sparsetir.bench.fresh)")
    parser.add_argument("--precision", action="store_true",
                        help="spmm in float16 and bfloat16 (float32 accumulation) against float32, sparsetir "
                             "and torch (sparsetir.bench.precision)")
    parser.add_argument("--rows", action="append", type=int,
                        help="rows per fresh sub-matrix (repeatable; default 1024 8192)")
    parser.add_argument("--exclude", action="append", default=[], metavar="CONTENDER",
                        help="skip a contender, e.g. scipy (repeatable)")
    parser.add_argument("--dense", action="store_true",
                        help="also time torch's dense matmul on the densified matrix (torch-dense: hundreds of ms "
                             "per call on large graphs, so off by default)")
    parser.add_argument("--no-flush", action="store_true", help="do not flush the cache between calls")
    parser.add_argument("--no-bounds", action="store_true",
                        help="skip measuring the machine (copy, gather and FMA rates, a few seconds) and the "
                             "'%% bound' column (sparsetir.bench.bounds)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict", action="store_true",
                        help="refuse to time on a busy machine (the machine check names what is busy; exit status 3)")
    parser.add_argument("--json", help="write records (stats, environment, setup times) to this file")
    args = parser.parse_args(argv)
    args.feat = args.feat or [32, 64, 128, 256]
    return args


DENSE_CONTENDER = "torch-dense"


def sparsetir_contenders(formats: list[str] | None) -> dict[str, str]:
    """Contender name -> format: plain ``sparsetir`` for the default CSR, ``sparsetir[fmt]`` otherwise."""
    if not formats or formats == ["csr"]:
        return {SPARSETIR: "csr"}
    return {f"{SPARSETIR}[{fmt}]": fmt for fmt in formats}


def tuned_contender(tune, op: str, A: sp.csr_matrix, feat: int, budget_s: float, seed: int,
                    bound_s: float | None = None) -> dict:
    """``tune``'s configuration for one case, as a contender spec (see ``engine.contender_config``), with
    the tuner's report of the case (candidates compiled and measured, the default's, the best's and
    ``bound_s``'s times) under ``"tuning"``."""
    try:
        result = tune(op, A, feat, budget_s=budget_s, seed=seed, bound_s=bound_s)
    except Exception as error:  # the other contenders still run; the row says why
        return {"error": f"unavailable: tuning: {type(error).__name__}: {error}"}
    return {"config": result.config, "tune_s": result.tune_s,
            "tuning": {"report": result.report(), "from_database": result.from_database,
                       **{name: getattr(result, name) for name in (
                           "compiled", "kernels_built", "measured", "trials", "default_median_s", "median_s",
                           "bound_s", "speedup_over_default")}}}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return _main(args, argv)
    except MachineBusyError as error:
        print(error, file=sys.stderr)
        return 3


def _main(args: argparse.Namespace, argv: list[str] | None) -> int:
    if args.strict:
        require_quiet_machine()
    for warning in configure_threads(args.threads):
        print(warning, file=sys.stderr)
    # torch, the compiler and the tuner load only now, after the thread settings they read once
    import torch  # noqa: PLC0415

    from ..ops import get_op  # noqa: PLC0415
    from ..tune import tune  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    kernel_factory = get_op(args.op).benchmark_kernel

    try:
        datasets = dataset_names(args.dataset)
    except Exception as error:
        print(f"dataset registry unavailable: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    timing = DEFAULT.replace(flush=not args.no_flush, samples=args.samples, max_time_s=args.max_time_s,
                             seed=args.seed, strict=args.strict)
    if args.fresh_structures:
        if args.op != "spmm":
            print("--fresh-structures times spmm", file=sys.stderr)
            return 2
        return fresh.main(datasets, args.rows or list(fresh.DEFAULT_ROWS), args.feat, args.seed, timing)
    if args.precision:
        if args.op != "spmm":
            print("--precision times spmm", file=sys.stderr)
            return 2
        return precision.main(datasets, args.feat, args.seed, timing)
    make_case = get_reference(args.op).make_case
    copy = measure_copy_bandwidth(timing)
    flush_note = f"flush {default_flush_bytes() >> 20} MiB" if timing.flush else "no flush"
    print(
        f"{args.op}: {args.threads} threads, {flush_note}, copy bandwidth "
        f"{copy['bytes_per_s'] / 1e9:.1f} GB/s ({copy['method']})"
    )

    machine = None
    if not args.no_bounds:
        machine = measure_machine(timing, feats=sorted(set(args.feat)))
        gather = ", ".join(f"{level} {max(rates.values()) / 1e9:.1f}" for level, rates in machine.gather.items())
        print(f"machine: copy {machine.copy_1t / 1e9:.1f} GB/s (1 thread), {machine.copy_all / 1e9:.1f} GB/s "
              f"({machine.threads} threads); gather GB/s {gather}; FMA {machine.fma_flops / 1e9:.0f} Gflop/s")
    records, all_rows = [], []
    for dataset in datasets:
        try:
            A = load_matrix(dataset, args.seed)
        except Exception as error:
            print(f"\n{dataset}: unavailable: {type(error).__name__}: {error}")
            continue
        for feat in args.feat:
            case = make_case(A, feat, np.random.default_rng(args.seed))
            bounds = None if machine is None else case_bounds(
                machine, op=args.op, shape=A.shape, nnz=A.nnz, feat=feat, min_bytes=case.min_bytes,
                flops=get_reference(args.op).flops(A.nnz, feat))
            contenders = sparsetir_contenders(args.formats)
            tuning = None
            if args.tune:
                tuned = tuned_contender(tune, args.op, A, feat, args.tune, args.seed,
                                        bounds["tight_s"] if bounds else None)
                tuning = tuned.pop("tuning", None)
                contenders[f"{SPARSETIR}-tuned"] = tuned
            excluded = set(args.exclude) | (set() if args.dense else {DENSE_CONTENDER})
            rows = contender_rows(args.op, A, case, contenders, exclude=excluded,
                                  kernel_factory=kernel_factory)
            if args.locality_bound:
                rows.append(locality_bound_row(args.op, A, case, {"format": "csr"}, kernel_factory))
            time_rows(args.op, rows, case, copy["bytes_per_s"], timing, bounds=bounds)
            print(f"\n{dataset} ({A.shape[0]:,} x {A.shape[1]:,}, {A.nnz:,} nnz), feat {feat}")
            if bounds:
                print(f"bounds: dram {bounds['dram_s'] * 1e3:.3f} ms, gather ({bounds['gather_level']}) "
                      f"{bounds['gather_s'] * 1e3:.3f} ms, flops {bounds['flops_s'] * 1e3:.3f} ms; "
                      f"'% bound' is against {bounds['tight']}")
            if tuning:
                print(f"tuning{' (database hit)' if tuning['from_database'] else ''}: {tuning['report']}")
            print(format_rows(rows))
            print(interference_line(rows))
            all_rows.append(rows)
            records.extend({**record(dataset, A, feat, case, row), "bounds": bounds, "tuning": tuning}
                           for row in rows)
    print()
    print(geomean_line(all_rows))

    if args.json:
        document = {
            "op": args.op,
            "argv": sys.argv[1:] if argv is None else list(argv),
            "environment": environment_info(flush=timing.flush),
            "copy_bandwidth": copy,
            "machine": machine.to_dict() if machine else None,
            "records": records,
        }
        with open(args.json, "w") as handle:
            json.dump(document, handle, indent=1)
    return 0 if all_rows else 1


if __name__ == "__main__":
    sys.exit(main())
