"""The R-GCN inference benchmark: sparsetir's ``nn.RGCN`` against PyG, DGL and plain torch.

    python -m sparsetir.bench.rgcn --dataset aifb --dataset mutag          # dims 32 32 32
    python -m sparsetir.bench.rgcn --dataset aifb --format default --format auto --json out.json
    python -m sparsetir.bench.rgcn --dataset relational:2000:8:20000 --no-memory   # a seeded random graph

The paper's end-to-end R-GCN experiment on the CPU: two layers (feature 32, hidden 32, output
32 by default), each PyG's ``RGCNConv(aggr="mean")`` (see :mod:`sparsetir.reference.rgcn`). For
each dataset the inputs are built once (``rgcn_inputs``: seeded features and weights); every
contender computes the model from those arrays with the same weights:

- ``sparsetir`` (``nn.RGCN(format=None)``: the heuristic format and dataflow), and when asked
  ``sparsetir-auto`` (``format="auto"``: tuned first, ``--tune-budget-s``, or the tuning
  database) and ``sparsetir[<format>]`` for an explicit relational format;
- every variant of :mod:`baselines.rgcn` (PyG ``RGCNConv`` and ``FastRGCNConv``, DGL
  ``RelGraphConv``, a torch per-relation loop, a torch gather-bmm-scatter; Graphiler, which
  cannot be installed, as an unavailable row).

Each contender is prepared once (its conversion, compile and tuning seconds in their own
fields) and checked entry-wise against the float64 reference (``rgcn_reference``, within its
tolerance) *before* anything is timed: a wrong contender gets a ``wrong`` record and is never
timed. The correct ones are timed together, interleaved round by round with a cache flush
before every call (``sparsetir.timing.time_interleaved``), one inference per call under
``torch.no_grad()``.

Peak memory (``record["memory"]``) is measured per contender in a fresh process: a probe host
(``python -m sparsetir.bench.rgcn --memory-probe``, :func:`measure_memory`) imports the libraries
and builds the inputs, running no torch or TVM op, then forks one child per contender. The child
warms torch up (its thread pool, lazily set-up state: the process's costs, not the contender's),
returns freed heap to the system (``malloc_trim``), reads its resident set size (RSS) and resets
the kernel's peak-RSS counter (``VmHWM``, by writing 5 to ``/proc/self/clear_refs``). It then
prepares the contender (conversion, compilation) and runs two inferences. ``peak_bytes`` is the
highest RSS during the inferences minus the RSS before the preparation, less the file-backed
pages faulted in meanwhile (library code and kernel libraries, which are shared and clean; they
are only added during a probe, so their growth at the end is their growth at the peak): the
anonymous memory the contender keeps (converted graph, modules, kernel arrays) plus the most its
inference holds at once. ``peak_rss_bytes`` and ``file_bytes`` give the total and the file-backed
part; ``prepare_peak_bytes`` is the peak of the preparation, ``resident_bytes`` what it keeps.
Where ``clear_refs`` cannot be written, a thread samples ``VmRSS`` every millisecond instead
(``method`` says which).

A dataset that cannot be loaded (BGS, AM and ogbl-biokg are download-only: offline they are
unavailable) gives one record with contender ``"*"`` and the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import gc
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import baselines as declared

from ..data import RelationalGraph, load_relational, relational_graphs
from ..reference import Case, host_array, result_mismatch
from ..reference.rgcn import RGCNInputs, rgcn_inputs, rgcn_reference
from ..runtime.loader import usable_cores
from ..timing import DEFAULT, TimingPolicy, default_flush_bytes, time_interleaved
from .bounds import measure_peak_rates, rate_percentages
from .case_runner import short_reason, status_of, unavailable_records
from .engine import Row
from .records import make_record, provenance, write_json_atomic
from .threads import configure_threads

__all__ = ["DEFAULT_DATASETS", "DEFAULT_DIMS", "EXPERIMENT", "MEMORY_METHODS", "SPARSETIR",
           "Contender", "attach_memory", "baseline_contenders", "benchmark_dataset", "check_contenders", "contender_name",
           "default_contenders", "load_graph", "main", "measure_memory", "memory_probe", "random_relational",
           "reference_case", "rgcn_flops", "rgcn_min_bytes", "sparsetir_contender", "sparsetir_factory",
           "time_contenders"]

EXPERIMENT = "rgcn"
SPARSETIR = "sparsetir"
DEFAULT_DATASETS = ("aifb", "mutag")
DEFAULT_DIMS = (32, 32, 32)
DEFAULT_TUNE_BUDGET_S = 20.0
#: A seeded random relational graph: ``relational:<nodes>:<relations>:<edges>`` (tests, the smoke run).
SYNTHETIC_PREFIX = "relational:"
SYNTHETIC_LIMITS = {"nodes": 1 << 22, "relations": 4096, "edges": 50_000_000}
MEMORY_METHODS = {
    "hwm": "VmHWM growth over VmRSS with the inputs built (peak reset through /proc/self/clear_refs, freed heap "
           "returned with malloc_trim first) less file-backed growth, in a fresh forked process per contender",
    "sampled": "highest VmRSS sampled every 1 ms over VmRSS with the inputs built (clear_refs not writable) less "
               "file-backed growth, in a fresh forked process per contender",
}
MEMORY_CALLS = 2  # inferences in a memory probe (after the preparation)
MEMORY_TIMEOUT_S = 600  # per contender
_PROBE_PREFIX = "rgcn-memory-probe: "


# ---------------------------------------------------------------- inputs


def parse_synthetic(name: str) -> tuple[int, int, int] | None:
    """``(nodes, relations, edges)`` of a ``relational:<n>:<R>:<E>`` spec, None for any other name;
    ``ValueError`` for a malformed spec or one past :data:`SYNTHETIC_LIMITS`."""
    if not name.startswith(SYNTHETIC_PREFIX):
        return None
    match = re.fullmatch(r"relational:(\d+):(\d+):(\d+)", name)
    if not match:
        raise ValueError(f"bad relational graph spec {name!r}; expected relational:<nodes>:<relations>:<edges>")
    sizes = tuple(int(part) for part in match.groups())
    for (what, limit), value in zip(SYNTHETIC_LIMITS.items(), sizes):
        if not 1 <= value <= limit:
            raise ValueError(f"relational graph spec {name!r}: {what} must lie in 1..{limit}, got {value}")
    return sizes


def random_relational(nodes: int, relations: int, edges: int, seed: int = 0) -> RelationalGraph:
    """A seeded relational graph: ``edges`` uniformly random typed edges (duplicates collapse when read)."""
    rng = np.random.default_rng(seed)
    return RelationalGraph(nodes, tuple(f"r{r}" for r in range(relations)), rng.integers(0, nodes, edges),
                           rng.integers(0, relations, edges), rng.integers(0, nodes, edges))


def check_dataset_name(name: str) -> None:
    """``ValueError`` unless ``name`` is a registered relational graph or a ``relational:`` spec."""
    if parse_synthetic(name) is None and name not in relational_graphs():
        raise ValueError(f"unknown relational graph {name!r}; known: {', '.join(relational_graphs())}, or "
                         f"{SYNTHETIC_PREFIX}<nodes>:<relations>:<edges>")


def load_graph(name: str, seed: int = 0):
    """The relation-major structure (``formats.relational.RelationalMatrix``) of dataset ``name``.

    A registry name loads through ``sparsetir.data.load_relational`` (embedded, cache, mirror,
    download; ``DatasetUnavailableError`` when no route has it); a ``relational:`` spec is generated."""
    from ..formats.relational import read_relational_input  # noqa: PLC0415 - the compiler loads after the thread settings

    check_dataset_name(name)
    sizes = parse_synthetic(name)
    graph = random_relational(*sizes, seed=seed) if sizes else load_relational(name)
    return read_relational_input(graph)


def check_dims(dims: Sequence[int]) -> tuple[int, int, int]:
    """``(in, hidden, out)``: the two-layer model's feature sizes."""
    dims = tuple(dims)
    if len(dims) != 3 or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
        raise ValueError(f"dims must be three positive ints (in, hidden, out) for the two-layer model, got {dims!r}")
    return tuple(int(d) for d in dims)


def rgcn_flops(inputs: RGCNInputs) -> int:
    """Useful flops of one inference: per layer ``2 nnz f_in f_out`` (each edge's row times ``W_r``, as
    ``rgms_flops``) plus ``2 n f_in f_out`` (the root term)."""
    nnz, n = int(inputs.graph.nnz), int(inputs.graph.shape[0])
    return sum(2 * (nnz + n) * f_in * f_out for f_in, f_out in zip(inputs.dims[:-1], inputs.dims[1:]))


def rgcn_min_bytes(inputs: RGCNInputs) -> int:
    """Bytes one inference moves at least: per layer the structure (indices and values, relation-major
    indptr), the layer's input, weights and output, once each (float32, int32 indices)."""
    graph = inputs.graph
    m, n, R, nnz = int(graph.shape[0]), int(graph.shape[1]), int(graph.num_relations), int(graph.nnz)
    total = 0
    for f_in, f_out in zip(inputs.dims[:-1], inputs.dims[1:]):
        total += nnz * 8 + (R * m + 1) * 4 + n * f_in * 4 + (R + 1) * f_in * f_out * 4 + f_out * 4 + m * f_out * 4
    return total


def reference_case(inputs: RGCNInputs) -> Case:
    """The float64 output and its entry-wise tolerance (``rgcn_reference``), as a checkable case."""
    reference, tolerance = rgcn_reference(inputs)
    return Case((inputs.X,), reference, tolerance, rgcn_min_bytes(inputs))


# ---------------------------------------------------------------- contenders


@dataclass
class Contender:
    """A named way to run the model: ``factory(inputs) -> run`` (None when unavailable, with ``reason``).

    ``probe`` says how a memory probe rebuilds it (``{"format": ...}`` or ``{"baseline": name}``; None:
    its memory is not measured); ``kind`` is ``"sparsetir"`` or ``"baseline"``."""

    name: str
    factory: Callable[[RGCNInputs], Callable[[], object]] | None
    kind: str = "baseline"
    reason: str | None = None
    probe: dict | None = None
    variant: str | None = None


def contender_name(fmt: str | None) -> str:
    """``sparsetir`` for the heuristic (None), ``sparsetir-auto`` for ``"auto"``, else ``sparsetir[<format>]``."""
    if fmt is None:
        return SPARSETIR
    if fmt == "auto":
        return f"{SPARSETIR}-auto"
    return f"{SPARSETIR}[{fmt}]"


def _format_option(value: str | None) -> str | None:
    """A format as the config and command line spell it: ``null``/``default``/``None`` mean the heuristic."""
    return None if value is None or str(value).strip().lower() in ("", "default", "none", "null") else str(value)


def sparsetir_factory(inputs: RGCNInputs, *, format=None, target="llvm", tune_budget_s: float | None = None):
    """``nn.RGCN`` with the inputs' weights: prepared, tuned (``format="auto"``) and compiled now.

    Returns ``run() -> (n, out)`` torch tensor (under ``torch.no_grad()``) with ``run.timings``
    (``convert_s``: the graph's normalisation and root relation plus the kernels' conversion;
    ``compile_s``; ``tune_s`` for ``"auto"``) and ``run.variant`` (the compiled kernels' formats)."""
    import torch  # noqa: PLC0415 - torch and the compiler load after the thread settings

    from ..nn.rgcn import RGCN  # noqa: PLC0415

    f_in, hidden, f_out = check_dims(inputs.dims)
    graph = inputs.graph
    model = RGCN(f_in, hidden, f_out, int(graph.num_relations), bias=True, format=format, target=target).eval()
    with torch.no_grad():
        for conv, layer in zip(model.convs, inputs.layers):
            conv.weight.copy_(torch.from_numpy(layer.weight))
            conv.root.copy_(torch.from_numpy(layer.root))
            conv.bias.copy_(torch.from_numpy(layer.bias))
    started = time.perf_counter()
    prepared = model.prepare(graph)
    prepare_s = time.perf_counter() - started
    tune_s = None
    if isinstance(format, str) and format.strip().lower() == "auto":
        from ..tune import tune  # noqa: PLC0415 - only an "auto" contender needs the tuner

        started = time.perf_counter()
        for shape in dict.fromkeys(zip(inputs.dims[:-1], inputs.dims[1:])):
            tune("rgms", prepared.matrix, shape, target=target, dtype="float32",
                 budget_s=DEFAULT_TUNE_BUDGET_S if tune_budget_s is None else tune_budget_s, progress=False)
        tune_s = time.perf_counter() - started
    X = torch.from_numpy(np.ascontiguousarray(inputs.X, dtype=np.float32))

    def run():
        with torch.no_grad():
            return model(X, prepared)

    run()  # compiles each layer's kernel (cached per graph and feature sizes)
    kernels = list(prepared.kernels.values())
    run.timings = {"convert_s": prepare_s + sum(k.timings["convert_s"] for k in kernels),
                   "compile_s": sum(k.timings["compile_s"] for k in kernels), "tune_s": tune_s}
    run.variant = "; ".join(dict.fromkeys(f"{k.spec['format']} dataflow={k.spec['dataflow']}" for k in kernels))
    return run


def sparsetir_contender(fmt: str | None = None, *, tune_budget_s: float | None = None, target="llvm") -> Contender:
    """The sparsetir model in format ``fmt`` (None: the heuristic; ``"auto"``: tuned) as a contender."""
    fmt = _format_option(fmt)
    probe = {"format": fmt, "tune_budget_s": tune_budget_s}
    return Contender(contender_name(fmt), lambda inputs: sparsetir_factory(inputs, format=fmt, target=target,
                                                                           tune_budget_s=tune_budget_s),
                     kind=SPARSETIR, probe=probe)


def baseline_contenders(names: Sequence[str] | None = None, *, device: str = "cpu") -> list[Contender]:
    """The declared R-GCN baselines (``baselines.variants("rgcn")``: all of them, or ``names`` in that order),
    each with its availability on ``device``."""
    contenders = []
    for name, entry in declared.variants(EXPERIMENT, names).items():
        ok, reason = entry.available(device)
        factory = (lambda inputs, entry=entry: entry.build(inputs, device=device)) if ok else None
        contenders.append(Contender(name, factory, reason=None if ok else reason, probe={"baseline": name}))
    return contenders


def default_contenders(sparsetir_formats: Mapping[str, str | None] | Sequence[str | None] = (None,),
                       baselines: Sequence[str] | None = None, *, tune_budget_s: float | None = None,
                       exclude: Sequence[str] = ()) -> list[Contender]:
    """The sparsetir contenders (a list of formats, or ``{name: format}``) followed by the baselines."""
    if isinstance(sparsetir_formats, Mapping):
        ours = []
        for name, fmt in sparsetir_formats.items():
            contender = sparsetir_contender(fmt, tune_budget_s=tune_budget_s)
            contender.name = name
            ours.append(contender)
    else:
        ours = [sparsetir_contender(fmt, tune_budget_s=tune_budget_s) for fmt in sparsetir_formats]
    return [c for c in ours + baseline_contenders(baselines) if c.name not in exclude]


def check_contenders(contenders: Sequence[Contender], inputs: RGCNInputs, case: Case) -> list[Row]:
    """Prepare every available contender (timed) and check its output against the reference.

    A contender that is unavailable, fails to build or to run, or whose output differs from the
    reference beyond its tolerance keeps no ``run``: it is never timed, and its row says why."""
    rows = []
    for contender in contenders:
        row = Row(contender.name, "compile" if contender.kind == SPARSETIR else "conversion")
        rows.append(row)
        if contender.factory is None:
            row.error = f"unavailable: {contender.reason}"
            continue
        started = time.perf_counter()
        try:
            run = contender.factory(inputs)
        except Exception as error:  # reported in the row; the other contenders go on
            row.error = f"failed to build: {type(error).__name__}: {error}"
            continue
        row.setup_s = time.perf_counter() - started
        row.timings = getattr(run, "timings", None)
        contender.variant = getattr(run, "variant", contender.variant)
        try:
            got = host_array(run())
        except Exception as error:
            row.error = f"failed when called: {type(error).__name__}: {error}"
            continue
        row.error = result_mismatch(got, case)
        if row.error is None:
            row.run = run
    return rows


def library_references() -> tuple[str, ...]:
    """The baselines a speedup is measured against (the declared R-GCN library references)."""
    return declared.library_references(EXPERIMENT)


def time_contenders(rows: Sequence[Row], timing: TimingPolicy) -> None:
    """Time every checked row together (interleaved, flushed) and fill in ``speedup_vs_best``: the
    fastest library reference's median over the row's median."""
    runnable = {row.contender: row.run for row in rows if row.run is not None}
    if not runnable:
        return
    stats = time_interleaved(runnable, timing)
    for row in rows:
        row.stats = stats.get(row.contender)
    references = [row.stats.median for row in rows if row.stats and row.contender in library_references()]
    for row in rows:
        if row.stats is not None and references:
            row.speedup_vs_best = min(references) / row.stats.median


# ---------------------------------------------------------------- peak memory


def _status_kib(field_name: str) -> int:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``)."""
    match = re.search(rf"^{field_name}:\s+(\d+)\s+kB", Path("/proc/self/status").read_text(), flags=re.M)
    if not match:
        raise RuntimeError(f"/proc/self/status has no {field_name}")
    return int(match.group(1))


def _rss_parts() -> dict[str, int]:
    """``VmRSS``, ``RssAnon`` and ``RssFile`` (KiB) of this process."""
    return {name: _status_kib(name) for name in ("VmRSS", "RssAnon", "RssFile")}


def _trim_heap() -> None:
    """Collect garbage and hand freed heap back to the system, so later allocations show in RSS."""
    gc.collect()
    name = ctypes.util.find_library("c")
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(name or "libc.so.6").malloc_trim(0)


def _warm_torch() -> None:
    """Run small torch ops on every thread once (the OpenMP pool, lazy library set-up), so that
    the first contender op of a probe does not book the process's one-off costs to the contender."""
    import torch  # noqa: PLC0415 - a memory probe has configured its threads before

    a = torch.ones(512, 64)
    index = torch.arange(512) % 7
    torch.zeros(7, 64).index_add_(0, index, a @ torch.ones(64, 64))
    torch.bincount(index)
    torch.bmm(a[:, None], torch.ones(512, 64, 8)).relu_()


def _reset_peak() -> bool:
    """Reset the process's peak RSS (``VmHWM``) to its current RSS; False where that is not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class _RssSampler:
    """The highest ``VmRSS`` a background thread sees, sampling every millisecond (the fallback)."""

    def __init__(self):
        self.peak_kib = _status_kib("VmRSS")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.wait(0.001):
            self.peak_kib = max(self.peak_kib, _status_kib("VmRSS"))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak_kib = max(self.peak_kib, _status_kib("VmRSS"))
        return self.peak_kib


@contextlib.contextmanager
def _peak_rss(method: str):
    """Yields a dict that holds ``peak_kib``, the highest RSS inside the block, once the block ends."""
    result = {}
    if method == "hwm":
        _reset_peak()
        yield result
        result["peak_kib"] = _status_kib("VmHWM")
    else:
        sampler = _RssSampler()
        try:
            yield result
        finally:
            result["peak_kib"] = sampler.stop()


def memory_probe(contender: Contender, inputs: RGCNInputs, *, calls: int = MEMORY_CALLS,
                 threads: int | None = None) -> dict:
    """This process's memory for one contender (see the module docstring). Call it in a fresh process
    (:func:`measure_memory` forks one per contender) whose libraries are imported and inputs built."""
    import torch  # noqa: PLC0415 - loaded by the probe host already, after the thread settings

    if contender.factory is None:
        raise RuntimeError(f"{contender.name} is unavailable: {contender.reason}")
    if threads:
        torch.set_num_threads(threads)
    _warm_torch()
    method = "hwm" if _reset_peak() else "sampled"
    _trim_heap()
    base = _rss_parts()
    with _peak_rss(method) as prepare_peak:
        run = contender.factory(inputs)
    prepared = _rss_parts()
    with _peak_rss(method) as inference_peak:
        for _ in range(calls):
            result = run()
            del result
    after = _rss_parts()

    def growth(kib: int) -> int:
        return max(0, kib) * 1024

    # file-backed pages (library code, kernel libraries) are only faulted in during a probe, never
    # dropped, so their growth at the end is their growth at the peak: the rest of the peak is anonymous
    return {"peak_bytes": growth(inference_peak["peak_kib"] - base["VmRSS"] - (after["RssFile"] - base["RssFile"])),
            "prepare_peak_bytes": growth(prepare_peak["peak_kib"] - base["VmRSS"]
                                         - (prepared["RssFile"] - base["RssFile"])),
            "resident_bytes": growth(prepared["RssAnon"] - base["RssAnon"]),
            "peak_rss_bytes": growth(inference_peak["peak_kib"] - base["VmRSS"]),
            "file_bytes": growth(after["RssFile"] - base["RssFile"]),
            "baseline_rss_bytes": base["VmRSS"] * 1024, "calls": calls, "method": MEMORY_METHODS[method]}


def _probe_in_child(contender: Contender, inputs: RGCNInputs, threads: int, timeout_s: float) -> tuple[int, int]:
    """Fork a child that measures ``contender`` and writes its JSON result to a pipe: ``(pid, read end)``.

    The parent has imported its libraries and built the inputs but run no torch or TVM op, so no
    thread pool exists yet; the child starts its own (torch's OpenMP pool, TVM's) and exits."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        return pid, read_end
    os.close(read_end)
    code = 0
    try:
        signal.alarm(max(1, int(timeout_s)))  # a stuck probe ends; the parent reports it
        result = memory_probe(contender, inputs, threads=threads)
    except BaseException as error:  # everything is reported through the pipe
        result, code = {"error": short_reason(f"{type(error).__name__}: {error}")}, 1
    try:
        with os.fdopen(write_end, "w") as out:
            json.dump(result, out)
    finally:
        os._exit(code)


def _collect_child(pid: int, read_end: int) -> dict:
    with os.fdopen(read_end) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    try:
        return json.loads(text)
    except ValueError:
        if os.WIFSIGNALED(status):
            why = f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            why = f"exited with {os.waitstatus_to_exitcode(status)}"
        return {"error": f"the memory probe {why} before reporting"}


def _median_probe(runs: list[dict]) -> dict:
    """One contender's memory over repeated probes: the run with the median ``peak_bytes``, with every
    run's peak beside it (``peak_bytes_runs``); the first error when no run succeeded."""
    good = sorted((run for run in runs if "peak_bytes" in run), key=lambda run: run["peak_bytes"])
    if not good:
        return runs[0]
    median = dict(good[(len(good) - 1) // 2])
    median["peak_bytes_runs"] = [run["peak_bytes"] for run in good]
    median["failed_runs"] = len(runs) - len(good)
    return median


def _probe_contender(name: str, spec: dict) -> Contender:
    if "baseline" in spec:
        (contender,) = baseline_contenders([spec["baseline"]])
    else:
        contender = sparsetir_contender(spec.get("format"), tune_budget_s=spec.get("tune_budget_s"))
    contender.name = name
    return contender


def measure_memory(contenders: Sequence[Contender], dataset: str, dims: Sequence[int], seed: int, *,
                   threads: int, jobs: int = 1, repeats: int = 1,
                   timeout_s: float = MEMORY_TIMEOUT_S) -> dict[str, dict]:
    """Name -> peak memory of each contender (see the module docstring).

    One new process (the probe host: ``python -m sparsetir.bench.rgcn --memory-probe``) imports the
    libraries and builds the inputs, then forks one child per contender (``jobs`` at a time), which
    measures that contender alone; with ``repeats`` > 1, that many children per contender, and the
    median run is kept (peaks vary between runs by the thread interleaving and malloc arenas). A contender with no ``probe`` (built in-process only, e.g. in a
    test) gets ``{"error": ...}``, as does one whose child fails."""
    memory = {c.name: {"error": "not measured: this contender has no memory probe"} for c in contenders
              if not c.probe}
    probed = [[c.name, c.probe] for c in contenders if c.probe]
    if not probed:
        return memory
    command = [sys.executable, "-m", "sparsetir.bench.rgcn", "--memory-probe", "--dataset", dataset,
               "--dims", *(str(d) for d in dims), "--seed", str(seed), "--threads", str(threads),
               "--memory-jobs", str(jobs), "--memory-repeats", str(repeats), "--probe-spec", json.dumps(probed),
               "--probe-timeout-s", str(timeout_s)]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=timeout_s * len(probed) * max(1, repeats) + 120)
    except subprocess.TimeoutExpired:
        return {**memory, **{name: {"error": "the memory probe host ran out of time"} for name, _ in probed}}
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(_PROBE_PREFIX):
            return {**memory, **json.loads(line[len(_PROBE_PREFIX):])}
    tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
    reason = short_reason(f"the memory probe host exited with {result.returncode}: {tail}")
    return {**memory, **{name: {"error": reason} for name, _ in probed}}


def _probe_main(args: argparse.Namespace) -> int:
    """``--memory-probe``: import what the contenders need, build the inputs, fork one child per
    contender, print one JSON line ``{name: memory}``."""
    import torch  # noqa: F401, PLC0415 - after configure_threads (main); no op runs here before the forks

    results = {}
    try:
        contenders = [_probe_contender(name, spec) for name, spec in json.loads(args.probe_spec)]
        if any(c.kind == SPARSETIR for c in contenders):  # the compiler belongs to the process, not a contender
            import sparsetir.nn.rgcn  # noqa: F401, PLC0415
            import sparsetir.tune  # noqa: F401, PLC0415 - "auto" contenders tune (or read the database)
        inputs = rgcn_inputs(load_graph(args.dataset[0], args.seed), check_dims(args.dims), seed=args.seed)
        tasks = [c for c in contenders for _ in range(max(1, args.memory_repeats))]
        measured: dict[str, list[dict]] = {c.name: [] for c in contenders}
        for first in range(0, len(tasks), max(1, args.memory_jobs)):
            batch = tasks[first:first + max(1, args.memory_jobs)]
            children = [(c.name, _probe_in_child(c, inputs, args.threads, args.probe_timeout_s)) for c in batch]
            for name, (pid, read_end) in children:
                measured[name].append(_collect_child(pid, read_end))
        results = {name: _median_probe(runs) for name, runs in measured.items()}
    except Exception as error:
        reason = {"error": short_reason(f"the memory probe host failed: {type(error).__name__}: {error}")}
        results.update({name: reason for name, _ in json.loads(args.probe_spec) if name not in results})
    print(_PROBE_PREFIX + json.dumps(results), flush=True)
    return 0


# ---------------------------------------------------------------- one dataset, end to end


def benchmark_dataset(dataset: str, contenders: Sequence[Contender], *, dims: Sequence[int] = DEFAULT_DIMS,
                      seed: int = 0, timing: TimingPolicy = DEFAULT, memory: bool = True, memory_jobs: int = 1,
                      memory_repeats: int = 1, threads: int | None = None,
                      progress: Callable[[str], None] | None = None, rates: dict | None = None) -> list[dict]:
    """Every contender on one dataset: inputs built once, each checked, the correct ones timed together,
    then (``memory``) each one's peak memory in its own process. One validated record per contender,
    or one ``"*"`` record saying why the dataset is unavailable. Each record carries the measured FMA rate
    and copy bandwidth (``rates``: ``bounds.measure_peak_rates``, measured here when not given)."""
    started = time.monotonic()

    def say(message: str) -> None:
        if progress is not None:
            progress(f"[{time.monotonic() - started:6.1f}s] {message}")

    dims = check_dims(dims)
    threads = threads or usable_cores()
    try:
        inputs = rgcn_inputs(load_graph(dataset, seed), dims, seed=seed)
    except (OSError, ValueError, KeyError, TypeError) as error:
        say(f"{dataset}: unavailable: {type(error).__name__}: {error}")
        return unavailable_records(experiment=EXPERIMENT, op=EXPERIMENT, dataset=dataset, feats=[dims[0]],
                                   reason=f"{type(error).__name__}: {error}")
    graph = inputs.graph
    say(f"{dataset}: {graph.shape[0]:,} nodes, {graph.num_relations} relations, {graph.nnz:,} edges; dims {dims}")
    case = reference_case(inputs)
    say("float64 reference computed")
    rows = check_contenders(contenders, inputs, case)
    for row in rows:
        say(f"  {row.contender}: " + ("correct" if row.run is not None else short_reason(row.error)))
    time_contenders(rows, timing)
    say("timed: " + ", ".join(f"{row.contender} {row.stats.median * 1e3:.3f} ms" for row in rows if row.stats))
    by_name = {c.name: c for c in contenders}
    where = provenance(flush=timing.flush, extra={"timing": timing.to_dict(), "threads": threads})
    rates = rates or measure_peak_rates(timing, threads=threads)
    records = []
    for row in rows:
        status, reason = status_of(row)
        times = dict(row.timings or {"convert_s": row.setup_s})
        times["setup_s"] = row.setup_s
        record = make_record(
            experiment=EXPERIMENT, op=EXPERIMENT, device="cpu", dataset=dataset, feat=dims[0],
            contender=row.contender, status=status, reason=reason, stats=row.stats.to_dict() if row.stats else None,
            shape=graph.shape, nnz=int(graph.nnz), variant=by_name[row.contender].variant, times=times,
            min_bytes=case.min_bytes, flops=rgcn_flops(inputs), provenance=where)
        record["rgcn"] = {"dims": list(dims), "num_relations": int(graph.num_relations), "seed": seed,
                          "kind": by_name[row.contender].kind, "speedup_vs_best": row.speedup_vs_best}
        record["memory"] = None
        record["rates"] = rates
        records.append(record)
    if memory:
        attach_memory(records, contenders, threads=threads, jobs=memory_jobs, repeats=memory_repeats)
        say("peak memory measured: " + ", ".join(
            f"{r['contender']} {r['memory']['peak_bytes'] / 2**20:.1f} MiB" for r in records
            if r["memory"] and "peak_bytes" in r["memory"]))
    return records


def attach_memory(records: list[dict], contenders: Sequence[Contender], *, threads: int, jobs: int = 1,
                  repeats: int = 1) -> list[dict]:
    """Measure the peak memory of every contender whose record of one dataset is ``ok`` (those that
    passed the check and were timed) and put it in ``record["memory"]`` (:func:`measure_memory`)."""
    timed = [r for r in records if r["status"] == "ok"]
    if not timed:
        return records
    first = timed[0]
    by_name = {c.name: c for c in contenders}
    unknown = [r["contender"] for r in timed if r["contender"] not in by_name]
    if unknown:
        raise ValueError(f"records of contenders {unknown} that are not among the given contenders")
    memory_of = measure_memory([by_name[r["contender"]] for r in timed], first["dataset"], first["rgcn"]["dims"],
                               first["rgcn"]["seed"], threads=threads, jobs=jobs, repeats=repeats)
    for record in timed:
        record["memory"] = memory_of.get(record["contender"])
    return records


# ---------------------------------------------------------------- command line


def _mib(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:.1f}"


def format_records(records: Sequence[dict]) -> str:
    """A table of one dataset's records: median ms, speedup over the best baseline, times, memory."""
    header = (f"{'contender':<28}{'median ms':>11}{'p20 ms':>9}{'p80 ms':>9}{'n':>4}{'vs best':>9}{'% FMA':>7}"
              f"{'% mem':>7}{'convert ms':>11}{'compile s':>10}{'tune s':>8}{'peak MiB':>9}")
    lines = [header]
    for record in records:
        if record["status"] != "ok":
            lines.append(f"{record['contender']:<28}{record['reason']}")
            continue
        stats, times = record["stats"], record["times"]
        speedup = record["rgcn"]["speedup_vs_best"]
        memory = record.get("memory") or {}
        convert = "-" if times["convert_s"] is None else f"{times['convert_s'] * 1e3:.1f}"
        compile_s = "-" if times["compile_s"] is None else f"{times['compile_s']:.2f}"
        tune_s = "-" if times["tune_s"] is None else f"{times['tune_s']:.1f}"
        peak = _mib(memory["peak_bytes"]) if "peak_bytes" in memory else "n/a"
        fma, mem = rate_percentages(record)
        lines.append(
            f"{record['contender']:<28}{stats['median'] * 1e3:>11.3f}{stats['p20'] * 1e3:>9.3f}"
            f"{stats['p80'] * 1e3:>9.3f}{stats['n']:>4}{(f'{speedup:.2f}x' if speedup else '-'):>9}"
            f"{(f'{fma:.1f}' if fma else '-'):>7}{(f'{mem:.1f}' if mem else '-'):>7}"
            f"{convert:>11}{compile_s:>10}{tune_s:>8}{peak:>9}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sparsetir.bench.rgcn", description=__doc__.split("\n\n")[0],
        epilog="Every contender is checked against the float64 reference before timing; peak memory is measured "
               "per contender in a fresh process (see the module docstring of sparsetir.bench.rgcn).")
    parser.add_argument("--dataset", action="append",
                        help=f"relational graph: {', '.join(relational_graphs())}, or "
                             f"{SYNTHETIC_PREFIX}<nodes>:<relations>:<edges> (repeatable; default aifb mutag)")
    parser.add_argument("--dims", type=int, nargs=3, default=list(DEFAULT_DIMS), metavar=("IN", "HIDDEN", "OUT"),
                        help="feature sizes of the two layers (default 32 32 32, as the paper)")
    parser.add_argument("--format", action="append", dest="formats", metavar="FORMAT",
                        help="a sparsetir contender per format (repeatable): default (the heuristic, named "
                             "sparsetir), auto (tuned, sparsetir-auto), or a relational format such as csf or "
                             "relcsr (sparsetir[FORMAT]); default: default")
    parser.add_argument("--tune-budget-s", type=float, default=None,
                        help=f"tuning seconds per layer shape for --format auto (default {DEFAULT_TUNE_BUDGET_S:g}; "
                             "a tuning-database hit takes none)")
    parser.add_argument("--baseline", action="append", dest="baselines", metavar="NAME",
                        help="only these baselines of baselines/rgcn.py (repeatable; default all)")
    parser.add_argument("--exclude", action="append", default=[], metavar="CONTENDER", help="skip a contender")
    parser.add_argument("--samples", type=int, default=30, help="timed calls per contender (default 30)")
    parser.add_argument("--max-time-s", type=float, default=20.0,
                        help="cap on the estimated sampling time per dataset; fewer samples, at least 10 (default 20)")
    parser.add_argument("--no-flush", action="store_true", help="do not flush the cache before each call")
    parser.add_argument("--no-memory", action="store_true", help="skip the per-contender peak-memory processes")
    parser.add_argument("--memory-jobs", type=int, default=1, help="memory probes run at a time (default 1)")
    parser.add_argument("--memory-repeats", type=int, default=1,
                        help="memory probes per contender; the median is kept (default 1)")
    parser.add_argument("--threads", type=int, default=usable_cores(),
                        help="threads for torch and TVM (default: all usable cores)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the features and weights (default 0)")
    parser.add_argument("--json", help="write the records (a JSON list) to this file")
    parser.add_argument("--memory-probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--probe-spec", help=argparse.SUPPRESS)
    parser.add_argument("--probe-timeout-s", type=float, default=MEMORY_TIMEOUT_S, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.dataset = args.dataset or list(DEFAULT_DATASETS)
    args.formats = [_format_option(f) for f in (args.formats or ["default"])]
    try:
        check_dims(args.dims)
        for name in args.dataset:
            check_dataset_name(name)
    except ValueError as error:
        parser.error(str(error))
    return args


def geomean(values: Sequence[float]) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for warning in configure_threads(args.threads):  # before torch and TVM load
        print(warning, file=sys.stderr)
    if args.memory_probe:
        return _probe_main(args)
    import torch  # noqa: PLC0415 - after the thread settings

    torch.set_num_threads(args.threads)
    timing = DEFAULT.replace(flush=not args.no_flush, samples=args.samples, max_time_s=args.max_time_s,
                             seed=args.seed)
    contenders = default_contenders(args.formats, args.baselines, tune_budget_s=args.tune_budget_s,
                                    exclude=args.exclude)
    flush = f"flush {default_flush_bytes() >> 20} MiB" if timing.flush else "no flush"
    print(f"rgcn inference: {args.threads} threads, {flush}, dims {tuple(args.dims)}")
    records, speedups = [], {}
    for dataset in args.dataset:
        found = benchmark_dataset(dataset, contenders, dims=args.dims, seed=args.seed, timing=timing,
                                  memory=not args.no_memory, memory_jobs=args.memory_jobs,
                                  memory_repeats=args.memory_repeats, threads=args.threads,
                                  progress=lambda message: print(message, file=sys.stderr, flush=True))
        print(f"\n{dataset}")
        print(format_records(found))
        for record in found:
            if record["status"] == "ok" and record["rgcn"]["kind"] == SPARSETIR:
                speedups.setdefault(record["contender"], []).append(record["rgcn"]["speedup_vs_best"])
        records += found
    for name, values in speedups.items():
        value = geomean(values)
        print(f"\n{name}: geomean speedup over the best baseline {value:.2f}x over {len(values)} dataset(s)"
              if value else f"\n{name}: no baseline was timed")
    if args.json:
        write_json_atomic(args.json, records)
    return 0 if any(record["status"] == "ok" for record in records) else 1


if __name__ == "__main__":
    sys.exit(main())
