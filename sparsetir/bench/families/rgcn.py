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

The family's training experiment, ``rgcn-train`` (config key ``training``; by hand
``python -m sparsetir.bench rgcn-train --dataset aifb --dataset mutag [--epochs 50] [--samples 20]``),
is PyG's ``examples/rgcn.py`` (Schlichtkrull et al.'s entity classification): two R-GCN layers with
basis decomposition (``bases``, 30) and mean aggregation, a featureless first layer (``in_channels`` =
the number of nodes, ``x=None``) to ``hidden`` (16) features, a ReLU, a second layer to the classes;
cross-entropy on the training entities, Adam (``lr`` 0.01, weight decay 5e-4; fused, for every
contender), on ``sparsetir.data.load_entities`` (AIFB, MUTAG: every triple an edge and its inverse, so
twice the predicates as relations). Every contender (``sparsetir``; the baselines the libraries declare
for ``rgcn-train``, ``baselines.variants("rgcn-train")``: PyG ``RGCNConv``, ``FastRGCNConv``, DGL)
starts from one initial state_dict (``nn.RGCN``'s, PyG's keys); each is trained for ``epochs`` epochs,
interleaved, and scored on the test entities (``test_acc``), then one more epoch of each is timed
``samples`` times, interleaved round by round with a cache flush before every epoch
(``bench.training.time_epochs``, through ``sparsetir.timing``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...data import relational_graphs
from ...data.random_relational import RELATIONAL_PREFIX, check_relational_name, parse_relational_spec, relational_graph
from ...reference import Case
from ...reference.rgcn import RGCNInputs, rgcn_inputs, rgcn_reference
from ...runtime.loader import usable_cores
from ...timing import DEFAULT, TimingPolicy
from ..bounds import measure_peak_rates
from ..case_runner import short_reason, unavailable_records
from ..family import SPARSETIR, Contender, Family, register
from ..memory import attach_memory
from ..records import provenance
from ..training import (
    TRAINING_POLICY,
    Trainer,
    TrainSettings,
    TrainTask,
    benchmark_training,
    declared_baselines,
    training_summary,
)

__all__ = ["DEFAULT_DATASETS", "DEFAULT_DIMS", "FAMILY", "TRAINING_EXPERIMENT", "RGCNTrainSettings", "SparsetirRGCN",
           "benchmark_dataset", "benchmark_rgcn_training", "check_dims", "entity_task", "load_graph", "rgcn_flops",
           "rgcn_min_bytes", "rgcn_training_contenders", "rgcn_training_summary"]

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


# ------------------------------------------------------------ entity-classification training (rgcn-train)

TRAINING_EXPERIMENT = "rgcn-train"


@dataclass(frozen=True)
class RGCNTrainSettings(TrainSettings):
    """PyG's example: 16 hidden features, 30 bases, Adam(lr 0.01, weight decay 5e-4), 50 epochs."""

    hidden: int = 16
    bases: int = 30


class SparsetirRGCN:
    """``sparsetir.nn.RGCN`` (the training contender); ``format``: the RGMS kernels' relational format."""

    def __init__(self, name: str = SPARSETIR, format=None):
        self.name, self.format = name, format

    def available(self) -> tuple[bool, str]:
        from ...version import __version__  # noqa: PLC0415 - with torch

        return True, f"sparsetir {__version__}"

    def model(self, dims: dict, state: dict):
        from ...nn import RGCN  # noqa: PLC0415 - torch and the compiler load after the thread settings

        model = RGCN(dims["nodes"], dims["hidden"], dims["classes"], dims["relations"], num_bases=dims["bases"],
                     format=self.format)
        model.load_state_dict(state)
        return model

    def structure(self, task):
        from ...nn import RGCNGraph  # noqa: PLC0415 - after the thread settings

        graph = task.graph
        return RGCNGraph.from_edges(graph["edge_index"], graph["edge_type"], task.dims["relations"],
                                    (graph["num_nodes"], graph["num_nodes"]))

    def forward(self, model, structure, x):
        return model(x, structure)


def entity_task(name: str, settings: RGCNTrainSettings) -> TrainTask:
    """The entity-classification task ``name`` as a :class:`~sparsetir.bench.training.TrainTask`:
    ``sparsetir.data.load_entities(name)``, or for ``relational:<nodes>:<relations>:<edges>`` a seeded
    random graph (each edge and its inverse) with four random classes (80 training, 20 test nodes)."""
    import torch  # noqa: PLC0415 - after the thread settings

    from ...data.entities import load_entities  # noqa: PLC0415

    task = _synthetic_task(name, settings.seed) if name.startswith(RELATIONAL_PREFIX) else load_entities(name)
    y = np.zeros(task.num_nodes, np.int64)
    y[task.train_idx], y[task.test_idx] = task.train_y, task.test_y
    dims = {"nodes": task.num_nodes, "hidden": settings.hidden, "classes": task.num_classes,
            "relations": task.num_relations, "bases": settings.bases}
    graph = {"edge_index": torch.from_numpy(np.array(task.edge_index)),
             "edge_type": torch.from_numpy(np.array(task.edge_type)), "num_nodes": task.num_nodes}
    return TrainTask(name, None, torch.from_numpy(y), torch.from_numpy(np.array(task.train_idx)),
                     torch.from_numpy(np.array(task.test_idx)), dims, graph,
                     f"{name}: {task.num_nodes:,} entities, {task.edge_index.shape[1]:,} edges, "
                     f"{task.num_relations} relations, {task.num_classes} classes, {len(task.train_idx)} training / "
                     f"{len(task.test_idx)} test entities")


def _synthetic_task(name: str, seed: int):
    from ...data.entities import EntityClassification  # noqa: PLC0415

    nodes, relations, edges = parse_relational_spec(name)
    if nodes < 100:
        raise ValueError(f"{name}: a synthetic task needs at least 100 nodes (80 training, 20 test)")
    rng = np.random.default_rng(seed)
    src, dst, rel = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges), rng.integers(0, relations, edges)
    labelled = rng.permutation(nodes)[:100]
    labels = rng.integers(0, 4, 100)
    return EntityClassification(name, nodes, 2 * relations, np.concatenate([np.stack([src, dst]), np.stack([dst, src])], 1),
                                np.concatenate([2 * rel, 2 * rel + 1]), labelled[:80], labels[:80], labelled[80:],
                                labels[80:], ("0", "1", "2", "3"))


def rgcn_training_contenders(names=None, *, sparsetir_formats: dict | None = None) -> dict:
    """``{name: contender}``: sparsetir's (``{name: format}``, default ``{"sparsetir": None}``) then the
    declared baselines (``names``: variant or library names, default every default one); a baseline
    that cannot run here gives the reason in its contender's place."""
    contenders = {name: SparsetirRGCN(name, fmt) for name, fmt in (sparsetir_formats or {SPARSETIR: None}).items()}
    return {**contenders, **declared_baselines(TRAINING_EXPERIMENT, names)}


def _initial_state(dims: dict, seed: int) -> dict:
    import torch  # noqa: PLC0415 - after the thread settings

    from ...nn import RGCN  # noqa: PLC0415

    torch.manual_seed(seed)
    model = RGCN(dims["nodes"], dims["hidden"], dims["classes"], dims["relations"], num_bases=dims["bases"])
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def benchmark_rgcn_training(dataset: str, settings: RGCNTrainSettings = RGCNTrainSettings(), *, contenders=None,
                            policy=TRAINING_POLICY, log=print) -> list[dict]:
    """Train and time every contender on ``dataset``; one record per contender (``training_record``)."""
    contenders = rgcn_training_contenders() if contenders is None else contenders
    return benchmark_training(TRAINING_EXPERIMENT, dataset, lambda: entity_task(dataset, settings),
                              lambda dims: _initial_state(dims, settings.seed), settings, contenders,
                              feat=settings.hidden, policy=policy, log=log)


def rgcn_training_summary(records: list[dict]) -> str:
    """One line per training record (``training.training_summary``)."""
    return training_summary(records, SPARSETIR)


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
                                     rgcn_training_summary, check_relational_name, datasets=("aifb", "mutag"))}

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

