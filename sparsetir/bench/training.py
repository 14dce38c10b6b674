"""Full-graph training benchmarks: what the families' training experiments (``gat.py``; the R-GCN family's) share.

A *contender* is one library's way to train the task's model. It answers

``available() -> (ok, reason)``
    whether it can run here, and why not;
``model(dims, state) -> torch.nn.Module``
    the model with the shared initial weights ``state`` loaded (every contender starts alike);
``structure(task) -> object``
    the graph in the form the library takes, built once (its seconds are the setup column);
``forward(model, structure, x) -> logits``
    one forward pass over the whole graph (``x``: the task's node features, or None).

:func:`prepare_runs` builds one :class:`TrainRun` per contender (model, Adam, structure);
:func:`train_and_score` trains fresh runs for a number of epochs and reports the test accuracy;
:func:`time_epochs` times one training epoch of each run (forward, loss on the training nodes,
backward, optimiser step) interleaved, round by round, through ``sparsetir.timing``
(``time_interleaved``: a cache flush before every epoch, every run the same number of samples).
A contender that fails is recorded with the reason and the others go on.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..timing import DEFAULT, Stats, TimingPolicy, time_interleaved

__all__ = ["TRAINING_POLICY", "TrainRun", "TrainSettings", "TrainTask", "Trainer", "benchmark_training",
           "declared_baselines", "prepare_runs", "time_epochs", "train_and_score", "training_record", "training_summary"]

#: Timing of training epochs: a flush before each, a short warm-up (an epoch is long), 20 samples.
TRAINING_POLICY = DEFAULT.replace(warmup_s=0.0, min_warmup=2, samples=20, min_samples=5)


@dataclass(frozen=True)
class Trainer:
    """A training experiment as the workflow runs it (``workflows/scripts/training_family.py``), declared
    by its family: ``benchmark(dataset, settings, contenders=, policy=, log=)`` gives the records,
    ``settings(epochs=, seed=)`` the setup, ``contenders(baselines)`` the contenders, ``summary(records)``
    the log line; ``check_dataset(name)`` raises ``ValueError`` for a dataset the trainer cannot load;
    ``datasets`` are the command line's default (``python -m sparsetir.bench <name>``)."""

    name: str
    title: str
    benchmark: Callable
    settings: type
    contenders: Callable
    summary: Callable
    check_dataset: Callable[[str], None]
    datasets: tuple = ()


@dataclass(frozen=True)
class TrainSettings:
    """What every contender shares: the optimiser (Adam, fused where torch has it), the epochs the
    accuracy is measured after, and the seed of the initial weights and of each epoch's draws."""

    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 50
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or self.epochs < 1:
            raise ValueError(f"epochs must be a positive int, got {self.epochs!r}")


@dataclass
class TrainTask:
    """A node-classification task: ``x`` (features, or None for featureless input), ``y`` (labels of
    every node; only ``train_idx`` and ``test_idx`` are read), ``dims`` (what models are built
    from) and whatever the contenders' ``structure`` reads (``graph``)."""

    name: str
    x: object
    y: object
    train_idx: object
    test_idx: object
    dims: dict
    graph: dict
    description: str = ""
    labelled: bool = True


@dataclass
class TrainRun:
    """One contender set up for training."""

    name: str
    contender: object
    status: str = "ok"
    reason: str | None = None
    model: object = None
    optimizer: object = None
    structure: object = None
    setup_s: float = 0.0
    first_epoch_s: float | None = None
    losses: list = field(default_factory=list)
    task: TrainTask | None = None

    def step(self) -> None:
        """One training epoch on the whole graph."""
        import torch.nn.functional as F  # noqa: PLC0415 - torch loads after the thread settings

        task = self.task
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.contender.forward(self.model, self.structure, task.x)
        loss = F.cross_entropy(logits.index_select(0, task.train_idx), task.y.index_select(0, task.train_idx))
        loss.backward()
        self.optimizer.step()
        self.losses.append(float(loss.detach()))

    def accuracy(self) -> float:
        """Accuracy on the test nodes (evaluation mode, no gradients)."""
        import torch  # noqa: PLC0415 - torch loads after the thread settings

        self.model.eval()
        with torch.no_grad():
            predicted = self.contender.forward(self.model, self.structure, self.task.x).argmax(dim=1)
        test = self.task.test_idx
        return float((predicted.index_select(0, test) == self.task.y.index_select(0, test)).float().mean())


def declared_baselines(experiment: str, names=None) -> dict:
    """``{name: contender}`` of the baselines the libraries declare for ``experiment`` (``names``: variant or
    library names, default every default one); one that cannot run here gives ``"unavailable: <reason>"``."""
    import baselines  # noqa: PLC0415 - the baselines load after the thread settings

    chosen = baselines.variants(experiment, names if names is not None else baselines.default_names(experiment))
    return {name: entry.build() if ok else f"unavailable: {reason}"
            for name, entry in chosen.items() for ok, reason in [entry.available()]}


def prepare_runs(contenders: Mapping[str, object], task: TrainTask, state: dict, settings: TrainSettings,
                 log: Callable[[str], None] = lambda line: None) -> dict[str, TrainRun]:
    """A :class:`TrainRun` per contender: its model from ``state``, a fused Adam, its structure (timed)."""
    import torch  # noqa: PLC0415 - torch loads after the thread settings

    runs = {}
    for name, contender in contenders.items():
        run = TrainRun(name, contender, task=task)
        runs[name] = run
        if isinstance(contender, str):  # a reason: the contender could not be built
            run.status, run.reason = "unavailable", contender
            continue
        ok, reason = contender.available()
        if not ok:
            run.status, run.reason = "unavailable", f"unavailable: {reason}"
            continue
        try:
            started = time.perf_counter()
            run.model = contender.model(task.dims, {k: v.clone() for k, v in state.items()})
            run.structure = contender.structure(task)
            run.setup_s = time.perf_counter() - started
            run.optimizer = torch.optim.Adam(run.model.parameters(), lr=settings.lr,
                                             weight_decay=settings.weight_decay, **_fused())
        except Exception as error:  # one contender failing does not stop the others
            run.status, run.reason = "failed", f"setup: {type(error).__name__}: {error}"
            log(f"  {name}: {run.reason}")
    return runs


def _fused() -> dict:
    """``fused=True`` where torch's Adam has a fused CPU kernel (the same optimiser for every contender)."""
    import inspect  # noqa: PLC0415 - with torch

    import torch  # noqa: PLC0415 - torch loads after the thread settings

    return {"fused": True} if "fused" in inspect.signature(torch.optim.Adam).parameters else {}


def train_and_score(runs: Mapping[str, TrainRun], epochs: int, seed: int,
                    log: Callable[[str], None] = lambda line: None) -> dict[str, dict]:
    """Train every ok run for ``epochs`` epochs (interleaved, each epoch's draws seeded alike), then its
    test accuracy; returns ``{name: {"test_acc", "final_loss", "epoch_s", "first_epoch_s"}}``."""
    import torch  # noqa: PLC0415 - torch loads after the thread settings

    results = {name: {"epoch_s": []} for name, run in runs.items() if run.status == "ok"}
    for epoch in range(epochs):
        for name, run in runs.items():
            if run.status != "ok":
                continue
            torch.manual_seed(seed * 100_003 + epoch)  # the same draws (dropout) for every contender
            started = time.perf_counter()
            try:
                run.step()
            except Exception as error:  # recorded; the others go on
                run.status, run.reason = "failed", f"epoch {epoch}: {type(error).__name__}: {error}"
                log(f"  {name}: {run.reason}")
                results.pop(name, None)
                continue
            results[name]["epoch_s"].append(time.perf_counter() - started)
        if epoch == 0:
            log("  first epoch (compiles, set-up): " + ", ".join(
                f"{name} {result['epoch_s'][0] * 1e3:.0f} ms" for name, result in results.items()))
    for name, result in results.items():
        run = runs[name]
        run.first_epoch_s = result["epoch_s"][0]
        result.update(first_epoch_s=run.first_epoch_s, final_loss=run.losses[-1], test_acc=run.accuracy())
    return results


def time_epochs(runs: Mapping[str, TrainRun], policy: TimingPolicy = TRAINING_POLICY) -> dict[str, Stats]:
    """One training epoch of every ok run, timed interleaved (``sparsetir.timing.time_interleaved``)."""
    steps = {name: run.step for name, run in runs.items() if run.status == "ok"}
    if not steps:
        return {}
    return time_interleaved(steps, policy)


def training_record(*, experiment: str, dataset: str, contender: str, run: TrainRun | None, stats: Stats | None,
                    score: dict | None, feat: int, status: str, reason: str | None = None, extra: dict | None = None,
                    policy: TimingPolicy = TRAINING_POLICY) -> dict:
    """A record of the harness's schema (``bench.records``), plus the training fields: ``test_acc``,
    ``final_loss``, ``first_epoch_s``, ``loadavg``."""
    from .records import make_record, provenance  # noqa: PLC0415 - with the rest of the harness

    info = {"loadavg": list(os.getloadavg()), "optimizer": "Adam" + (" (fused)" if _fused() else "")}
    record = make_record(experiment=experiment, op=experiment, device="cpu", dataset=dataset, feat=feat,
                         contender=contender, status=status, reason=reason,
                         stats=stats.to_dict() if stats is not None else None,
                         times={"setup_s": run.setup_s if run is not None and run.status == "ok" else None},
                         provenance=provenance(device="cpu", flush=policy.flush, flush_bytes=policy.flush_bytes,
                                               extra=info))
    score = score or {}
    record.update({"test_acc": score.get("test_acc"), "final_loss": score.get("final_loss"),
                   "first_epoch_s": score.get("first_epoch_s"), **(extra or {})})
    return record


def benchmark_training(experiment: str, dataset: str, make_task: Callable[[], TrainTask],
                       initial_state: Callable[[dict], dict], settings: TrainSettings, contenders: Mapping[str, object],
                       *, feat: int, policy: TimingPolicy = TRAINING_POLICY, log: Callable[[str], None] = print,
                       extra: Callable[[TrainRun, TrainTask], dict] = lambda run, task: {}) -> list[dict]:
    """The whole benchmark of one dataset: the task (``make_task()``; an OSError, ValueError or KeyError
    makes every contender's record unavailable, with the reason), the shared initial weights
    (``initial_state(task.dims)``), training and scoring (:func:`train_and_score`), then the timed
    epochs of fresh runs (:func:`time_epochs`); one :func:`training_record` per contender, with
    ``extra(run, task)`` (measured after the timing, for the ok ones) added to it."""
    try:
        task = make_task()
    except (OSError, ValueError, KeyError) as error:
        reason = f"unavailable: {type(error).__name__}: {error}"
        log(f"{experiment} {dataset}: {reason}")
        return [training_record(experiment=experiment, dataset=dataset, contender=name, run=None, stats=None,
                                score=None, feat=feat, status="unavailable", reason=reason) for name in contenders]
    import torch  # noqa: PLC0415 - torch loads after the thread settings

    log(f"{experiment} {task.description}; {torch.get_num_threads()} thread(s)")
    state = initial_state(task.dims)
    scoring = prepare_runs(contenders, task, state, settings, log)
    scores = train_and_score(scoring, settings.epochs, settings.seed, log)
    timing = prepare_runs({name: run.contender for name, run in scoring.items() if run.status == "ok"}, task, state,
                          settings, log)
    stats = time_epochs(timing, policy)
    records = []
    for name in contenders:
        run = timing.get(name) if name in stats else scoring[name]
        status = "ok" if name in stats else (run.status if run.status != "ok" else "failed")
        records.append(training_record(
            experiment=experiment, dataset=dataset, contender=name, run=run, stats=stats.get(name),
            score=scores.get(name), feat=feat, status=status, reason=None if status == "ok" else run.reason,
            policy=policy, extra={"epochs": settings.epochs, "dims": task.dims,
                                  **(extra(run, task) if status == "ok" else {})}))
    return records


def training_summary(records: list[dict], sparsetir_prefix: str = "sparsetir") -> str:
    """One line per record: median ms per epoch, speed-up over the best baseline (the fastest contender
    not named ``sparsetir...``), accuracy, peak memory where measured, first-epoch seconds."""
    lines = []
    by_dataset: dict = {}
    for record in records:
        by_dataset.setdefault(record["dataset"], []).append(record)
    for dataset, group in by_dataset.items():
        medians = [r["stats"]["median"] for r in group if r["status"] == "ok"
                   and not r["contender"].startswith(sparsetir_prefix)]
        best = min(medians) if medians else None
        for r in group:
            if r["status"] != "ok":
                lines.append(f"  {dataset:<12} {r['contender']:<18} {r['reason']}")
                continue
            median = r["stats"]["median"]
            ratio = f"{best / median:5.2f}x" if best else "   -  "
            peak = r.get("peak_memory_bytes")
            lines.append(f"  {dataset:<12} {r['contender']:<18} {median * 1e3:9.2f} ms/epoch (p20 "
                         f"{r['stats']['p20'] * 1e3:.2f}, p80 {r['stats']['p80'] * 1e3:.2f})  {ratio} vs best baseline"
                         f"  test acc {r['test_acc']:.4f}" + (f"  peak {peak / 2**20:.1f} MiB" if peak else "")
                         + f"  first epoch {r['first_epoch_s']:.2f} s")
    return "\n".join(lines)


def training_main(parser, argv, datasets: list[str], run_dataset: Callable, summary: Callable[[list[dict]], str]) -> int:
    """The command line every training benchmark shares (``python -m sparsetir.bench <trainer>``, ``bench.gat``).

    ``parser`` holds the benchmark's own options and ``--samples``; this adds ``--seed``, ``--threads`` and
    ``--json``, sets the thread counts before torch and TVM load, then calls ``run_dataset(dataset, args,
    policy, log)`` for each dataset (``args.dataset`` or ``datasets``), prints ``summary`` of its records and
    writes them all to ``--json``. Exit status 0 when every record is ok or unavailable.
    """
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", help="write the records here")
    args = parser.parse_args(argv)
    from .threads import configure_threads  # noqa: PLC0415 - before torch and TVM load

    for warning in configure_threads(args.threads):
        print(warning, file=sys.stderr)
    import torch  # noqa: PLC0415 - after the thread settings

    torch.set_num_threads(args.threads)
    policy = TRAINING_POLICY.replace(samples=args.samples, min_samples=min(args.samples, TRAINING_POLICY.min_samples))
    records = []
    for dataset in args.dataset or datasets:
        found = run_dataset(dataset, args, policy, lambda line: print(line, file=sys.stderr, flush=True))
        print(summary(found), flush=True)
        records += found
    if args.json:
        from .records import write_json_atomic  # noqa: PLC0415 - with the rest of the harness

        write_json_atomic(args.json, records)
    return 0 if all(r["status"] in ("ok", "unavailable") for r in records) else 1
