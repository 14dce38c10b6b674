"""Run a bundle here: check and time its candidates and the baselines, one record file per case.

    bash <bundle>/run.sh --out "$OUT"        # sets up tvm_ffi and the runtime, then:
    python -m sparsetir.bench.bundle.runner <bundle> [--out DIR] [--time-limit-s S] [--dataset D] [--feat F]

Only the TVM *runtime* is used: the ``tvm`` package is made unimportable before anything else
loads, kernels load through :mod:`sparsetir.runtime` from the bundle's ``lib/``
(``$SPARSETIR_TVM_RUNTIME_DIR``). For each (dataset, feature size) every candidate is checked
against the op's float64 reference (``sparsetir.reference``), then the candidates and baselines
are timed with the one timer (``bench.engine.time_rows``: CUDA events and a 256 MiB flush on a
GPU, interleaved on a CPU). Nothing here imports the compiler.
``<out>/records/<dataset>-feat<F>.json`` is written after every case (then each family's part the
bundle has, ``bundle.parts``: its cases' records under ``<out>/records/<family>/``, written by the
part's module) and
``<out>/run.json`` says how far the run got, so a killed run leaves every finished case behind.
A case is not started when the time limit would be passed (estimated from the slowest case so far).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ...reference import get_reference
from ...runtime.loader import cuda_available, usable_cores
from ...timing import TimingPolicy
from ..case_runner import flops, measure_bandwidth, short_reason, status_of
from ..engine import Row, contender_rows, prepare, time_rows, variant_name
from ..records import ALL_CONTENDERS, make_record, provenance, write_json_atomic
from ..threads import configure_threads
from .candidates import assemble_kernel, candidate_factory, load_input
from .manifest import contender_name, is_candidate_name, read_manifest
from .parts import bundle_parts


def block_compiler() -> None:
    """Make ``import tvm`` fail in this process, as on a host without the TVM compiler."""
    if "tvm" in sys.modules and sys.modules["tvm"] is not None:
        raise RuntimeError("the tvm package was imported before the bundle runner started")
    sys.modules["tvm"] = None


def compiler_loaded() -> bool:
    """Whether libtvm_compiler is mapped into this process."""
    try:
        return "libtvm_compiler" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def gpu_ready() -> tuple[bool, str]:
    """Whether this process can run CUDA kernels (driver, device, torch with CUDA), and why not."""
    ok, why = cuda_available()
    if not ok:
        return False, why
    import torch  # noqa: PLC0415 - after the thread settings (main), and only for a CUDA bundle

    if not torch.cuda.is_available():
        return False, f"torch {torch.__version__} sees no CUDA device"
    return True, ""


def run_case(bundle: Path, manifest: dict, case: dict, A, scratch: Path, bandwidth: dict, timing: dict,
             where: dict) -> list[dict]:
    """Check and time one case's candidates and baselines; one validated record per contender."""
    device, feat = manifest["device"], case["feat"]
    bench_case = get_reference(manifest["op"]).make_case(A, feat, np.random.default_rng(manifest["seed"]))
    rows, candidates = [], {}
    for candidate in case["candidates"]:
        name = contender_name(candidate)
        candidates[name] = candidate
        library = assemble_kernel(bundle, candidate, scratch)
        rows.append(prepare(Row(name, "compile"), candidate_factory(library, bench_case.inputs[0], device), bench_case))
    rows += contender_rows(manifest["op"], A, bench_case, {}, baseline_names=manifest["baselines"], device=device,
                           options=manifest["baseline_options"])
    time_rows(manifest["op"], rows, bench_case, bandwidth["bytes_per_s"], timing, device)
    records = []
    for row in rows:
        status, reason = status_of(row)
        candidate = candidates.get(row.contender)
        if candidate is not None:
            times = {"convert_s": candidate.get("convert_s"), "compile_s": candidate.get("compile_s"),
                     "setup_s": row.setup_s}
        else:
            times = {"convert_s": row.setup_s, "setup_s": row.setup_s}
        record = make_record(
            experiment=manifest["op"], op=manifest["op"], device=device, dataset=case["dataset"], feat=feat,
            contender=row.contender, status=status, reason=reason, stats=row.stats.to_dict() if row.stats else None,
            shape=A.shape, nnz=int(A.nnz), variant=variant_name(candidate["config"]) if candidate else None,
            times=times, min_bytes=bench_case.min_bytes, flops=flops(manifest["op"], int(A.nnz), feat),
            copy_bytes_per_s=bandwidth["bytes_per_s"], provenance=where)
        if candidate is not None:
            record["candidate"] = {"id": candidate["id"], "config": candidate["config"],
                                   "tuning_key": case["tuning_key"], "library": candidate["library"]}
        records.append(record)
    return records


def failed_records(manifest: dict, case: dict, reason: str, where: dict) -> list[dict]:
    return [make_record(experiment=manifest["op"], op=manifest["op"], device=manifest["device"], dataset=case["dataset"],
                        feat=case["feat"], contender=ALL_CONTENDERS, status="failed", reason=short_reason(reason),
                        provenance=where)]


def summary_line(records: list[dict]) -> str:
    """The fastest candidate and baseline of a case, for the progress output."""
    ok = [r for r in records if r["status"] == "ok"]
    ours = [r for r in ok if is_candidate_name(r["contender"])]
    theirs = [r for r in ok if not is_candidate_name(r["contender"])]
    wrong = sum(r["status"] == "wrong" for r in records)
    parts = []
    if ours:
        best = min(ours, key=lambda r: r["stats"]["median"])
        parts.append(f"best candidate {best['stats']['median'] * 1e3:.4f} ms ({best['variant']})")
    if theirs:
        best = min(theirs, key=lambda r: r["stats"]["median"])
        parts.append(f"best baseline {best['contender']} {best['stats']['median'] * 1e3:.4f} ms")
    if wrong:
        parts.append(f"{wrong} WRONG")
    return "; ".join(parts) or "nothing timed"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.bundle.runner",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", help="the bundle folder (with manifest.json)")
    parser.add_argument("--out", help="where records go (default: $OUT, else <bundle>/results)")
    parser.add_argument("--time-limit-s", type=float,
                        help="start no case that would end after this (default: the manifest's)")
    parser.add_argument("--dataset", action="append", help="only these datasets (repeatable)")
    parser.add_argument("--feat", action="append", type=int, help="only these feature sizes (repeatable)")
    parser.add_argument("--samples", type=int, help="timed calls per contender (default: manifest)")
    return parser


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    args = _parser().parse_args(argv)
    block_compiler()
    bundle = Path(args.bundle).resolve()
    try:
        manifest = read_manifest(bundle)
    except (FileNotFoundError, ValueError) as error:
        print(f"[bundle-run] {error}", file=sys.stderr)
        return 2
    device = manifest["device"]
    os.environ.setdefault("SPARSETIR_TVM_RUNTIME_DIR", str(bundle / "lib"))
    configure_threads(usable_cores())  # spin limits and thread counts, before torch loads
    out = Path(args.out or os.environ.get("OUT") or bundle / "results")
    (out / "records").mkdir(parents=True, exist_ok=True)
    limit_s = args.time_limit_s if args.time_limit_s is not None else manifest["time_limit_s"]
    timing = TimingPolicy.from_mapping(manifest["timing"])
    if args.samples:
        timing = timing.replace(samples=args.samples, min_samples=min(timing.min_samples, args.samples))
    cases = [c for c in manifest["cases"] if (not args.dataset or c["dataset"] in args.dataset)
             and (not args.feat or c["feat"] in args.feat)]
    status = {"bundle": manifest["id"], "device": device, "cases_total": len(cases), "cases_done": 0,
              "time_limit_s": limit_s, "stopped": None, "files": []}
    say = lambda message: print(f"[bundle-run {time.monotonic() - started:6.1f}s] {message}", flush=True)  # noqa: E731
    say(f"{device} bundle {manifest['id']}: {len(cases)} case(s), time limit {limit_s:g} s, records to {out}")
    if device == "cuda":
        ready, why = gpu_ready()
        if not ready:
            status["stopped"] = f"cannot run a CUDA bundle here: {why}"
            write_json_atomic(out / "run.json", status)
            print(f"[bundle-run] {status['stopped']}", file=sys.stderr, flush=True)
            return 2
    bandwidth = measure_bandwidth(timing, device)
    where = provenance(device=device, flush=timing.flush, extra={
        "timing": timing.to_dict(), "copy_bandwidth": {k: bandwidth[k] for k in ("bytes", "bytes_per_s", "method")},
        "bundle": {"id": manifest["id"], "created": manifest["created"], "build": manifest["build"],
                   "target": manifest["target"]},
        "runtime_only": True})
    say(f"copy bandwidth {bandwidth['bytes_per_s'] / 1e9:.0f} GB/s; {where.get('gpu') or where.get('cpu_model')}")
    matrices, slowest = {}, 0.0
    with tempfile.TemporaryDirectory(prefix="sparsetir-bundle-run-") as scratch:
        for number, case in enumerate(cases, 1):
            elapsed = time.monotonic() - started
            if elapsed + 1.2 * slowest > limit_s:
                status["stopped"] = (f"time limit: {elapsed:.0f} s used, the slowest case took {slowest:.1f} s, "
                                     f"limit {limit_s:g} s")
                say(f"stopping before case {number}/{len(cases)}: {status['stopped']}")
                break
            case_started = time.monotonic()
            dataset, feat = case["dataset"], case["feat"]
            try:
                if dataset not in matrices:
                    matrices.clear()  # keep one graph in memory
                    matrices[dataset] = load_input(bundle, manifest["inputs"][dataset])
                records = run_case(bundle, manifest, case, matrices[dataset], Path(scratch), bandwidth, timing, where)
            except Exception as error:  # one broken case must not lose the others
                records = failed_records(manifest, case, f"{type(error).__name__}: {error}", where)
            name = f"records/{Path(manifest['inputs'][dataset]['file']).stem}-feat{feat}.json"
            write_json_atomic(out / name, records)
            slowest = max(slowest, time.monotonic() - case_started)
            status["cases_done"] += 1
            status["files"].append(name)
            status.update(elapsed_s=round(time.monotonic() - started, 1), tvm_compiler_loaded=compiler_loaded())
            write_json_atomic(out / "run.json", status)
            say(f"case {number}/{len(cases)} {dataset} feat {feat} ({time.monotonic() - case_started:.1f} s): "
                f"{summary_line(records)}")
        for name, part in bundle_parts().items():  # each family's cases, after the op's
            if not manifest.get(name) or status["stopped"] is not None:
                continue
            section = dict(manifest[name])
            if part.dataset_key and args.dataset:
                section["cases"] = [c for c in section["cases"] if c[part.dataset_key] in args.dataset]
            status["files"] += part.run(bundle, {**manifest, name: section}, out, Path(scratch), assemble_kernel,
                                        bandwidth=bandwidth, timing=timing, where=where,
                                        deadline_s=started + limit_s, say=say)
    status.update(elapsed_s=round(time.monotonic() - started, 1), tvm_compiler_loaded=compiler_loaded(),
                  finished=status["stopped"] is None)
    write_json_atomic(out / "run.json", status)
    say(f"done: {status['cases_done']}/{len(cases)} case(s) in {status['elapsed_s']:.0f} s"
        + (f" (stopped: {status['stopped']})" if status["stopped"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
