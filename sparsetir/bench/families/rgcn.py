"""R-GCN inference: sparsetir's ``nn.RGCN`` against PyG, DGL and plain torch (a :class:`Family` declaration).

    python -m sparsetir.bench rgcn --dataset aifb --dataset mutag          # dims 32 32 32
    python -m sparsetir.bench rgcn --dataset aifb --format default --format auto --json out.json
    python -m sparsetir.bench rgcn --dataset relational:2000:8:20000 --no-memory   # a seeded random graph

The paper's end-to-end R-GCN experiment on the CPU: two layers (feature 32, hidden 32, output
32 by default), each PyG's ``RGCNConv(aggr="mean")`` (see :mod:`sparsetir.reference.rgcn`). For
each dataset the inputs are built once (``rgcn_inputs``: seeded features and weights); every
contender computes the model from those arrays with the same weights:

- ``sparsetir`` (``nn.RGCN(format=None)``: the heuristic format and dataflow), and when asked
  ``sparsetir-auto`` (``format="auto"``: tuned first, ``--tune-budget-s``, or the tuning
  database) and ``sparsetir[<format>]`` for an explicit relational format;
- every variant the baseline libraries declare for ``rgcn`` (PyG ``RGCNConv`` and ``FastRGCNConv``,
  DGL ``RelGraphConv``, a torch per-relation loop, a torch gather-bmm-scatter; Graphiler, which
  cannot be installed, as an unavailable row).

The engine (``bench.family``) prepares each contender once (its conversion, compile and tuning
seconds in their own fields), checks it entry-wise against the float64 reference before anything
is timed, and times the correct ones interleaved, one inference per call under ``torch.no_grad()``.
Peak memory (``record["memory"]``) is measured per contender in a fresh process
(:mod:`sparsetir.bench.memory`). A dataset that cannot be loaded (BGS, AM and ogbl-biokg are
download-only: offline they are unavailable) gives one record with contender ``"*"`` and the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ...data import relational_graphs
from ...data.random_relational import RELATIONAL_PREFIX, check_relational_name, relational_graph
from ...reference import Case
from ...reference.rgcn import RGCNInputs, rgcn_inputs, rgcn_reference
from ...runtime.loader import usable_cores
from ...timing import DEFAULT, TimingPolicy
from ..bounds import measure_peak_rates
from ..case_runner import short_reason, unavailable_records
from ..family import SPARSETIR, Contender, Family, register
from ..memory import attach_memory
from ..records import provenance
from ..rgcn_train import EXPERIMENT as TRAINING_EXPERIMENT
from ..rgcn_train import RGCNTrainSettings, benchmark_rgcn_training, rgcn_training_contenders
from ..rgcn_train import summary as training_summary
from ..training import Trainer

__all__ = ["DEFAULT_DATASETS", "DEFAULT_DIMS", "FAMILY", "benchmark_dataset", "check_dims", "load_graph",
           "rgcn_flops", "rgcn_min_bytes"]

DEFAULT_DATASETS = ("aifb", "mutag")
DEFAULT_DIMS = (32, 32, 32)


def load_graph(name: str, seed: int = 0):
    """The relation-major structure (``formats.relational.RelationalMatrix``) of dataset ``name``
    (``sparsetir.data.random_relational.relational_graph``)."""
    from ...formats.relational import read_relational_input  # noqa: PLC0415 - the compiler loads after the threads

    return read_relational_input(relational_graph(name, seed))


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


class RGCN(Family):
    """R-GCN inference (see the module docstring)."""

    name = op = "rgcn"
    title = "R-GCN inference"
    description = "RGCN inference (AIFB, MUTAG, BGS, AM, ogbl-biokg) vs PyG, DGL and Graphiler"
    default_tune_budget_s = 20.0
    config_op = "rgms"

    workflow = "cases"
    case_folder = "timed"  # then the memory step writes records/
    finish_step = "memory"
    figures = {"figure": "rgcn_inference.png"}
    #: entity-classification training: training.smk's rules
    trainings = {"training": Trainer(TRAINING_EXPERIMENT, "R-GCN entity classification training (2 layers, 30 bases)",
                                     benchmark_rgcn_training, RGCNTrainSettings, rgcn_training_contenders,
                                     training_summary, check_relational_name)}

    def workflow_cases(self, settings) -> dict[str, dict]:
        """One job per graph."""
        from ...data import dataset_slug  # noqa: PLC0415

        return {dataset_slug(name): {"dataset": name} for name in settings["datasets"]}

    def workflow_finish(self, records, settings) -> list[dict]:
        """The peak memory of every contender that passed its check (``record["memory"]``, filled in by
        ``bench.memory.attach_memory``: a probe process builds the inputs, then forks one child per
        contender, ``memory_jobs`` at a time), the children with the timed run's thread count; with
        ``memory: false`` the records pass through unchanged."""
        import json  # noqa: PLC0415
        import sys  # noqa: PLC0415

        from ..threads import configure_threads  # noqa: PLC0415

        timed_records = [r for r in records if r["status"] == "ok"]
        if not settings.get("memory", True) or not timed_records:
            return records
        threads = int(timed_records[0]["provenance"].get("threads") or 1)
        configure_threads(threads)  # the probe host and its children, like the timed run
        contenders = self.contenders(settings["sparsetir"], settings["baselines"],
                                     tune_budget_s=settings.get("tune_budget_s"))
        first = timed_records[0]
        case = {"dataset": first["dataset"], "dims": first[self.name]["dims"], "seed": first[self.name]["seed"]}
        attach_memory(self.name, records, contenders, case, threads=threads, jobs=settings.get("memory_jobs", 1),
                      repeats=settings.get("memory_repeats", 1))
        for record in timed_records:
            print(f"{record['dataset']} {record['contender']}: {json.dumps(record['memory'])}", file=sys.stderr)
        return records

    def data_needs(self, section) -> list:
        return self.registry_needs(section.get("datasets", []))

    def check_config(self, section) -> None:
        """Relational graph names (or generator specs) and three model dims."""
        from ...data.random_relational import check_relational_name  # noqa: PLC0415 - only when a config is checked

        self.check_names("datasets", section["datasets"], check_relational_name)
        self.check_names("dims", [section["dims"]], check_dims)

    def workflow_unavailable(self, case, settings) -> list[dict] | None:
        """One ``unavailable`` record for a graph no route provides (torch and TVM not loaded)."""
        from ...data import load_relational  # noqa: PLC0415
        from ...data.random_relational import parse_relational_spec  # noqa: PLC0415
        from ..case_runner import unavailable_records  # noqa: PLC0415

        if parse_relational_spec(case["dataset"]) is not None:
            return None
        try:
            load_relational(case["dataset"])
        except (OSError, ValueError) as error:
            return unavailable_records(experiment=self.name, op=self.op, dataset=case["dataset"],
                                       feats=[int(settings["dims"][0])], reason=f"{type(error).__name__}: {error}")
        return None

    def workflow_case(self, case, settings, *, timing, device, seed, threads, say) -> list[dict]:
        """One graph (``case["dataset"]``), every contender timed; peak memory is the next step's."""
        contenders = self.contenders(settings["sparsetir"], settings["baselines"],
                                     tune_budget_s=settings.get("tune_budget_s"))
        records = benchmark_dataset(case["dataset"], contenders, dims=settings["dims"], seed=seed, timing=timing,
                                    memory=False, threads=threads, progress=say)
        say(self.format_records(records))
        return records

    def reference(self, inputs: RGCNInputs) -> Case:
        """The float64 output and its entry-wise tolerance (``rgcn_reference``), as a checkable case."""
        reference, tolerance = rgcn_reference(inputs)
        return Case((inputs.X,), reference, tolerance, rgcn_min_bytes(inputs))

    def sparsetir_factory(self, inputs: RGCNInputs, *, format=None, tune_budget_s=None, form=None, target="llvm"):
        """``nn.RGCN`` with the inputs' weights: prepared, tuned (``format="auto"``) and compiled now.

        Returns ``run() -> (n, out)`` torch tensor (under ``torch.no_grad()``) with ``run.timings``
        (``convert_s``: the graph's normalisation and root relation plus the kernels' conversion;
        ``compile_s``; ``tune_s`` for ``"auto"``) and ``run.variant`` (the compiled kernels' formats)."""
        import torch  # noqa: PLC0415 - torch and the compiler load after the thread settings

        from ...nn.rgcn import RGCN as Model  # noqa: PLC0415

        f_in, hidden, f_out = check_dims(inputs.dims)
        graph = inputs.graph
        model = Model(f_in, hidden, f_out, int(graph.num_relations), bias=True, format=format, target=target).eval()
        with torch.no_grad():
            for module, layer in zip(model.convs, inputs.layers):
                module.weight.copy_(torch.from_numpy(layer.weight))
                module.root.copy_(torch.from_numpy(layer.root))
                module.bias.copy_(torch.from_numpy(layer.bias))
        started = time.perf_counter()
        prepared = model.prepare(graph)
        prepare_s = time.perf_counter() - started
        tune_s = None
        if isinstance(format, str) and format.strip().lower() == "auto":
            from ...tune import tune  # noqa: PLC0415 - only an "auto" contender needs the tuner

            started = time.perf_counter()
            for shape in dict.fromkeys(zip(inputs.dims[:-1], inputs.dims[1:])):
                tune("rgms", prepared.matrix, shape, target=target, dtype="float32",
                     budget_s=self.default_tune_budget_s if tune_budget_s is None else tune_budget_s, progress=False)
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

    def record_fields(self, row, contender, *, dims, num_relations, seed, rates, **_) -> dict:
        return {"rgcn": {"dims": list(dims), "num_relations": num_relations, "seed": seed, "kind": contender.kind,
                         "speedup_vs_best": row.speedup_vs_best},
                "memory": None, "rates": rates}

    # ------------------------------------------------------------ memory probes

    def probe_inputs(self, *, dataset: str, dims, seed: int) -> RGCNInputs:
        return rgcn_inputs(load_graph(dataset, seed), check_dims(dims), seed=seed)

    def prepare_probe(self, contenders: Sequence[Contender]) -> None:
        """The compiler belongs to the probe host, not to a contender: import it before the forks."""
        if any(c.kind == SPARSETIR for c in contenders):
            import sparsetir.nn.rgcn  # noqa: F401, PLC0415
            import sparsetir.tune  # noqa: F401, PLC0415 - "auto" contenders tune (or read the database)

    # ------------------------------------------------------------ the command line

    def note(self, record: dict) -> str | None:
        memory = record.get("memory") or {}
        peak = f"peak {memory['peak_bytes'] / 2**20:.1f} MiB" if "peak_bytes" in memory else None
        return " ".join(part for part in (peak, record.get("reason")) if part)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dataset", action="append",
                            help=f"relational graph: {', '.join(relational_graphs())}, or "
                                 f"{RELATIONAL_PREFIX}<nodes>:<relations>:<edges> (repeatable; default aifb mutag)")
        parser.add_argument("--dims", type=int, nargs=3, default=list(DEFAULT_DIMS), metavar=("IN", "HIDDEN", "OUT"),
                            help="feature sizes of the two layers (default 32 32 32, as the paper)")
        parser.add_argument("--no-memory", action="store_true", help="skip the per-contender peak-memory processes")
        parser.add_argument("--memory-jobs", type=int, default=1, help="memory probes run at a time (default 1)")
        parser.add_argument("--memory-repeats", type=int, default=1,
                            help="memory probes per contender; the median is kept (default 1)")
        parser.set_defaults(samples=30, max_time_s=20.0)

    def check_arguments(self, args) -> None:
        args.dataset = args.dataset or list(DEFAULT_DATASETS)
        check_dims(args.dims)
        for name in args.dataset:
            check_relational_name(name)

    def cli_cases(self, args, timing: TimingPolicy, contenders, say):
        for dataset in args.dataset:
            yield dataset, lambda dataset=dataset: benchmark_dataset(
                dataset, contenders, dims=args.dims, seed=args.seed, timing=timing, memory=not args.no_memory,
                memory_jobs=args.memory_jobs, memory_repeats=args.memory_repeats, threads=args.threads, progress=say)


FAMILY = register(RGCN())


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
        inputs = FAMILY.probe_inputs(dataset=dataset, dims=dims, seed=seed)
    except (OSError, ValueError, KeyError, TypeError) as error:
        say(f"{dataset}: unavailable: {type(error).__name__}: {error}")
        return unavailable_records(experiment=FAMILY.name, op=FAMILY.op, dataset=dataset, feats=[dims[0]],
                                   reason=f"{type(error).__name__}: {error}")
    graph = inputs.graph
    say(f"{dataset}: {graph.shape[0]:,} nodes, {graph.num_relations} relations, {graph.nnz:,} edges; dims {dims}")
    case = FAMILY.reference(inputs)
    say("float64 reference computed")
    rows = FAMILY.check(contenders, inputs, case)
    for row in rows:
        say(f"  {row.contender}: " + ("correct" if row.run is not None else short_reason(row.error)))
    FAMILY.time(rows, timing, contenders)
    say("timed: " + ", ".join(f"{row.contender} {row.stats.median * 1e3:.3f} ms" for row in rows if row.stats))
    by_name = {c.name: c for c in contenders}
    where = provenance(flush=timing.flush, extra={"timing": timing.to_dict(), "threads": threads})
    rates = rates or measure_peak_rates(timing, threads=threads)
    records = [FAMILY.record(row, by_name[row.contender], dataset=dataset, feat=dims[0], provenance=where,
                             shape=graph.shape, nnz=int(graph.nnz), min_bytes=case.min_bytes, flops=rgcn_flops(inputs),
                             dims=dims, num_relations=int(graph.num_relations), seed=seed, rates=rates)
               for row in rows]
    if memory:
        attach_memory(FAMILY.name, records, contenders, {"dataset": dataset, "dims": list(dims), "seed": seed},
                      threads=threads, jobs=memory_jobs, repeats=memory_repeats)
        say("peak memory measured: " + ", ".join(
            f"{r['contender']} {r['memory']['peak_bytes'] / 2**20:.1f} MiB" for r in records
            if r["memory"] and "peak_bytes" in r["memory"]))
    return records

