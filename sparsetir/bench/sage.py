"""GraphSAGE training benchmark (the ``sage`` experiment): sparsetir.nn against PyG and DGL.

    python -m sparsetir.bench sage --dataset cora --mode full --epochs 20 [--seeds 0 1] [--json out.json]

Every contender trains the same model (``layers`` SAGEConv layers, mean aggregation, ``hidden``
features, relu and dropout between layers, Adam, cross-entropy on the training nodes) from the
same initial weights (one PyG-keyed state_dict per seed) on the same inputs:

- ``full``: the whole graph every epoch (one step);
- ``minibatch``: batches of ``batch_size`` training nodes, each a fresh structure of per-layer
  blocks drawn by :class:`sparsetir.nn.NeighborSampler` (fan-out per hop, seeded); the batches are
  sampled once per epoch and given to every contender in its own structure type. A step gathers
  the batch's input features, runs forward, backward and the optimiser.

Contenders run interleaved: each epoch, every contender runs one epoch, in an order rotated per
epoch. An epoch's time is the sum of its steps (``perf_counter``); ``median_ms`` is the median over
the epochs after ``warmup`` that the interference sentinel kept: after every epoch of all the
contenders (one interleaved round) the sentinel (``sparsetir.timing.interference``, the default
``TimingPolicy``'s limits) judges it, and a flagged epoch is left out of every contender's
statistics. A training epoch is not repeated (the models would train one epoch more): a case
with more flagged epochs than the repeat bound is marked contaminated, and when fewer than half
of its timed epochs are clean they are all kept (``flagged_kept``). Each record's
``stats["interference"]`` is the account, the same for every contender of the case; ``compile_s`` is the first epoch's excess over that median (kernel
compiles, ``torch.compile``, PyG's template generation), with sparsetir's kernel compile and
conversion seconds beside it (``kernel_compile_s``). After the timed epochs one more runs under
``torch.profiler`` for ``epoch_split``: the shares of sparse ops, dense ops and the rest
(``bench.epoch_split``). Test accuracy is measured after the last
epoch with a full-graph forward pass. A graph without labels (any registry graph or generator
spec that is not in ``sparsetir.data.node_classification``) gets seeded random features and
labels: its rows carry times only (``labelled: false``, no accuracy).

Contenders: ``sparsetir`` (dense features, as the baselines get them), ``sparsetir-sparse-x`` (the
features as a CSR matrix where they are mostly zeros: the first layer's projections become SpMMs),
``sparsetir-compiled`` (``torch.compile(fullgraph=True)``),
and the GraphSAGE baselines the libraries declare (``baselines.variants("sage")``: PyG's SAGEConv on
each of its CPU structures, DGL's SAGEConv).
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.sparse as sp

from ..data.training_graph import SPLIT, TrainingGraph, load_training_graph

__all__ = ["SageSettings", "load_sage_graph", "run_sage",
           "sparsetir_contender"]

MODES = ("full", "minibatch")
EXPERIMENT = "sage"


@dataclass(frozen=True)
class SageSettings:
    """The training setup shared by every contender."""

    hidden: int = 128
    layers: int = 3
    lr: float = 0.01
    dropout: float = 0.5
    epochs: int = 10
    warmup: int = 2
    fanouts: tuple = (10, 10, 10)
    batch_size: int = 1024
    random_features: int = 128
    random_classes: int = 8
    split: tuple = SPLIT

    def __post_init__(self):
        if self.epochs <= self.warmup:
            raise ValueError(f"epochs ({self.epochs}) must exceed warmup ({self.warmup}): no epoch would be timed")
        if len(self.fanouts) != self.layers:
            raise ValueError(f"fanouts {list(self.fanouts)} must give one hop per layer ({self.layers})")


def load_sage_graph(name: str, settings: SageSettings, seed: int = 0) -> TrainingGraph:
    """``name`` as a :class:`~sparsetir.data.training_graph.TrainingGraph` under ``settings``' random
    features, classes and split."""
    return load_training_graph(name, random_features=settings.random_features,
                               random_classes=settings.random_classes, split=settings.split, seed=seed)


# --- sparsetir's contenders ----------------------------------------------------------------------

class SparsetirSage:
    """``sparsetir.nn.GraphSAGE``: structures as ``(indptr, indices)`` tensors (full graph) or
    ``Adjacency`` blocks; ``sparse_features``: the input features as a torch CSR tensor (``"auto"``:
    where they are sparse enough to gain, :data:`SPARSE_FEATURES_BELOW`); ``compiled``:
    ``torch.compile(fullgraph=True)`` (full graph only: every batch is a new shape);
    ``dropout_in_aggregation``: GraphSAGE's option (the dropout read inside the next layer's op)."""

    def __init__(self, name: str, *, sparse_features: bool = False, compiled: bool = False, format: str = "csr",
                 dropout_in_aggregation: bool = False):
        self.name, self.sparse_features, self.compiled, self.format = name, sparse_features, compiled, format
        self.dropout_in_aggregation = dropout_in_aggregation

    def model(self, in_channels, hidden, num_layers, out_channels, dropout, state):
        from ..nn import GraphSAGE  # noqa: PLC0415 - after the thread settings

        model = GraphSAGE(in_channels, hidden, num_layers, out_channels, dropout=dropout, format=self.format,
                          dropout_in_aggregation=self.dropout_in_aggregation)
        model.load_state_dict(state)
        return model

    def full_graph(self, adj_t):
        import torch  # noqa: PLC0415 - after the thread settings

        return (torch.from_numpy(adj_t.indptr.astype(np.int64)), torch.from_numpy(adj_t.indices.astype(np.int64)))

    def blocks(self, blocks):
        import torch  # noqa: PLC0415 - after the thread settings

        from ..nn import Adjacency  # noqa: PLC0415 - after the thread settings

        return [Adjacency(torch.from_numpy(indptr), torch.from_numpy(indices), None, sources)
                for indptr, indices, sources, _targets in blocks]

    def forward(self, model, x, structure):
        return model(x, structure)


def sparsetir_contender(name: str, options: dict | None = None) -> SparsetirSage:
    """A sparsetir contender from its config options (``sparse_features``, ``compiled``, ``format``,
    ``dropout_in_aggregation``)."""
    options = dict(options or {})
    unknown = set(options) - {"sparse_features", "compiled", "format", "dropout_in_aggregation"}
    if unknown:
        raise ValueError(f"sparsetir contender {name!r}: unknown options {sorted(unknown)}")
    return SparsetirSage(name, **options)


def baseline_contender(name: str):
    """``(contender, None)`` for a declared GraphSAGE baseline (``baselines.variants("sage")``), or
    ``(None, reason)`` when it cannot run here; ``ValueError`` for a name that is not one."""
    import baselines  # noqa: PLC0415 - the baselines load after the thread settings

    entry = baselines.baseline(EXPERIMENT, name)
    ok, reason = entry.available()
    return (entry.build(), None) if ok else (None, f"unavailable: {reason}")


# --- one benchmark run ----------------------------------------------------------------------------

@dataclass
class _Run:
    contender: object
    model: object = None
    optimizer: object = None
    x: object = None
    rows: object = None  # what a mini-batch step gathers its input rows from
    full: object = None
    batches: list = field(default_factory=list)
    epoch_s: list = field(default_factory=list)
    status: str = "ok"
    reason: str | None = None
    setup_s: float = 0.0
    kernel_compile_s: float = 0.0
    eval_model: object = None
    accuracy: dict = field(default_factory=dict)
    epoch_split: dict | None = None


def _torch_csr(csr: sp.csr_matrix):
    import torch  # noqa: PLC0415 - after the thread settings

    return torch.sparse_csr_tensor(torch.from_numpy(csr.indptr.astype(np.int64)),
                                   torch.from_numpy(csr.indices.astype(np.int64)),
                                   torch.from_numpy(np.array(csr.data, dtype=np.float32)), size=csr.shape)


#: ``sparse_features: auto`` keeps features sparse below this density (bag-of-words features: cora 1.3%,
#: coauthor_cs 0.9%, dblp 0.3%; amazon_cs 35% stays dense: its SpMM would cost more than the dense product).
SPARSE_FEATURES_BELOW = 0.1


def _features(graph: TrainingGraph, sparse):
    """(the full-graph input, the source a step gathers its rows from): dense tensors, or for
    ``sparse`` features (``"auto"``: below :data:`SPARSE_FEATURES_BELOW` density) a torch CSR tensor
    and the scipy CSR matrix."""
    import torch  # noqa: PLC0415 - after the thread settings

    if sparse == "auto" and sp.issparse(graph.features):
        rows, cols = graph.features.shape
        sparse = graph.features.nnz < SPARSE_FEATURES_BELOW * rows * cols
    if sparse and sp.issparse(graph.features):
        csr = graph.features.tocsr()
        return _torch_csr(csr), csr
    dense = graph.features.toarray() if sp.issparse(graph.features) else graph.features
    x = torch.from_numpy(np.array(dense, dtype=np.float32))
    return x, x


def _gather(rows, n_id):
    """The rows ``n_id`` of the features (a step's input): a dense gather, or a CSR row selection."""
    if sp.issparse(rows):
        return _torch_csr(rows[n_id.numpy()])
    return rows.index_select(0, n_id)  # what x[n_id] computes, without advanced indexing's overhead


def _kernel_seconds() -> float:
    from ..ops import torch_ops  # noqa: PLC0415 - the compiler loads after the thread settings

    stats = torch_ops.stats()
    return stats["compile_s"] + stats["convert_s"] + stats["validate_s"]


def run_sage(dataset: str, mode: str, settings: SageSettings, *, seeds=(0,), contenders: dict | None = None,
             baselines=None, threads: int | None = None, log=print) -> list[dict]:
    """Train every contender on ``dataset`` in ``mode`` for each seed; one record per (contender, seed).

    ``contenders``: sparsetir contender name -> options (default: ``sparsetir`` with dense features);
    ``baselines``: declared GraphSAGE baselines (default: every one declared).
    A dataset that cannot be loaded gives one ``unavailable`` record per contender (before torch loads).
    ``threads``: torch's intra-op threads (set before anything runs).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    contenders = {"sparsetir": {}} if contenders is None else contenders
    if baselines is None:
        import baselines as declared  # noqa: PLC0415 - the baselines load after the thread settings

        baselines = declared.default_names(EXPERIMENT)
    names = [*contenders, *baselines]
    try:
        graph = load_sage_graph(dataset, settings, seed=0)
    except (OSError, ValueError, TypeError, KeyError) as error:
        reason = f"unavailable: {type(error).__name__}: {error}"
        log(f"sage {dataset} {mode}: {reason}")
        return [_record(dataset, mode, name, seed, None, settings, status="unavailable", reason=reason)
                for seed in seeds for name in names]
    import warnings  # noqa: PLC0415 - with torch

    import torch  # noqa: PLC0415 - after the thread settings

    from .records import provenance  # noqa: PLC0415 - with the rest of the harness

    if threads is not None:
        torch.set_num_threads(threads)
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
    log(f"sage {dataset} {mode}: {graph.adj_t.shape[0]:,} nodes, {graph.adj_t.nnz:,} edges, "
        f"{graph.features.shape[1]} features, {graph.num_classes} classes{'' if graph.labelled else ' (random)'}; "
        f"{torch.get_num_threads()} thread(s)")
    records = []
    for seed in seeds:
        runs = {}
        for name in names:
            if name in contenders:
                runs[name] = _Run(sparsetir_contender(name, contenders[name]))
                continue
            contender, reason = baseline_contender(name)
            runs[name] = _Run(contender) if contender is not None else _Run(None, status="unavailable", reason=reason)
        sample_s, judged = _train(graph, mode, settings, seed, runs, log)
        records += [_finish(graph, dataset, mode, name, seed, run, settings, sample_s, provenance, judged)
                    for name, run in runs.items()]
    return records


def _state(graph: TrainingGraph, settings: SageSettings, seed: int) -> dict:
    """The initial weights of every contender (PyG GraphSAGE's keys)."""
    import torch  # noqa: PLC0415 - after the thread settings

    from ..nn import GraphSAGE  # noqa: PLC0415 - after the thread settings

    torch.manual_seed(seed)
    model = GraphSAGE(graph.features.shape[1], settings.hidden, settings.layers, graph.num_classes)
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def _block_arrays(batch) -> list:
    return [(block.indptr.numpy().astype(np.int64), block.indices.numpy().astype(np.int64), block.num_cols,
             block.num_rows) for block in batch.blocks]


def _contender_blocks(contender, batch) -> list:
    """A batch's blocks as ``contender`` takes them: sparsetir's are the sampler's own (with their
    proofs of validity), the baselines' their structure types built from the same arrays."""
    if isinstance(contender, SparsetirSage):
        return list(batch.blocks)
    return contender.blocks(_block_arrays(batch))


def _setup(run: _Run, graph: TrainingGraph, mode: str, settings: SageSettings, state: dict, epoch_batches) -> None:
    import torch  # noqa: PLC0415 - after the thread settings

    started = time.perf_counter()
    run.model = run.contender.model(graph.features.shape[1], settings.hidden, settings.layers, graph.num_classes,
                                    settings.dropout, state)
    run.eval_model = run.model
    if getattr(run.contender, "compiled", False):
        if mode != "full":
            run.status, run.reason = "unavailable", ("unavailable: torch.compile runs full-graph training only "
                                                     "(every mini-batch is a new shape: a recompile per batch)")
            return
        run.model = torch.compile(run.model, fullgraph=True)
    run.optimizer = torch.optim.Adam(run.model.parameters(), lr=settings.lr)
    sparse = getattr(run.contender, "sparse_features", False)
    run.x, run.rows = _features(graph, sparse)
    if sparse == "auto" and run.x.layout != torch.sparse_csr:  # dense after all: the plain sparsetir run
        rows, cols = graph.features.shape
        density = graph.features.nnz / max(1, rows * cols) if sp.issparse(graph.features) else 1.0
        run.status, run.reason = "unavailable", (f"unavailable: the features are {density:.0%} non-zero, so "
                                                 "sparse_features=auto keeps them dense (sparsetir's run)")
        return
    run.full = run.contender.full_graph(graph.adj_t)
    if mode == "minibatch":
        run.batches = [[(torch.from_numpy(batch.n_id), _contender_blocks(run.contender, batch),
                         torch.from_numpy(batch.seeds)) for batch in batches] for batches in epoch_batches]
    run.setup_s = time.perf_counter() - started


@dataclass
class _Judged:
    """The sentinel's verdict on every epoch round of one seed (``flags[epoch]``) and its account."""

    sentinel: object
    flags: list

    def kept(self, epoch_s: list, warmup: int) -> tuple[list, dict]:
        """The timed epochs (after ``warmup``) the statistics use, and the ``interference`` account."""
        timed, flags = epoch_s[warmup:], self.flags[warmup:len(epoch_s)]
        clean = [t for t, flagged in zip(timed, flags) if not flagged]
        flagged = len(timed) - len(clean)
        flagged_kept = len(clean) < max(1, math.ceil(len(timed) / 2))
        bound = math.ceil(self.sentinel.policy.max_repeat_fraction * len(timed))
        report = self.sentinel.report(rounds=len(timed), kept=len(timed) if flagged_kept else len(clean),
                                      flagged=flagged, repeated=0, contaminated=flagged > bound,
                                      flagged_kept=flagged_kept)
        return (timed if flagged_kept else clean), report


def _train(graph: TrainingGraph, mode: str, settings: SageSettings, seed: int, runs: dict, log) -> tuple:
    """Interleaved training of every available run, each epoch round judged by the sentinel; returns
    the seconds spent sampling batches and the verdicts (:class:`_Judged`)."""
    import torch  # noqa: PLC0415 - after the thread settings

    from ..nn import NeighborSampler  # noqa: PLC0415 - after the thread settings
    from ..timing import DEFAULT  # noqa: PLC0415
    from ..timing.interference import Sentinel  # noqa: PLC0415

    state = _state(graph, settings, seed)
    labels = torch.from_numpy(graph.labels.astype(np.int64))
    train = torch.from_numpy(graph.train)
    train_labels = labels.index_select(0, train)
    sample_s = 0.0
    epoch_batches = []
    if mode == "minibatch":
        started = time.perf_counter()
        sampler = NeighborSampler(graph.adj_t, settings.fanouts, seed=seed)
        epoch_batches = [list(sampler.batches(graph.train, settings.batch_size, epoch=epoch))
                         for epoch in range(settings.epochs)]
        sample_s = time.perf_counter() - started
    for run in runs.values():
        if run.status == "ok":
            try:
                _setup(run, graph, mode, settings, state, epoch_batches)
            except Exception as error:  # one contender failing does not stop the others
                run.status, run.reason = "failed", f"setup: {type(error).__name__}: {error}"
    active = [name for name, run in runs.items() if run.status == "ok"]
    judged = _Judged(Sentinel(DEFAULT), [])
    judged.sentinel.start()
    for epoch in range(settings.epochs):
        shift = epoch % max(1, len(active))
        for name in active[shift:] + active[:shift]:
            run = runs[name]
            if run.status != "ok":
                continue
            torch.manual_seed(seed * 100_003 + epoch)  # every contender draws the same dropout masks
            kernels_before = _kernel_seconds()
            run.model.train()
            started = time.perf_counter()
            try:
                _epoch(run, mode, epoch, train, train_labels, labels)
            except Exception as error:  # recorded; the others go on
                run.status, run.reason = "failed", f"epoch {epoch}: {type(error).__name__}: {error}"
                continue
            run.epoch_s.append(time.perf_counter() - started)
            run.kernel_compile_s += _kernel_seconds() - kernels_before
        judged.flags.append(judged.sentinel.judge(1).flagged)  # the round: this epoch of every contender
        if epoch == 0 or epoch == settings.epochs - 1:
            log(f"  seed {seed} epoch {epoch}: " + ", ".join(
                f"{name} {runs[name].epoch_s[-1] * 1e3:.0f} ms" for name in active if runs[name].epoch_s
                and len(runs[name].epoch_s) == epoch + 1))
    for run in runs.values():
        if run.status == "ok":
            run.accuracy = _accuracy(run, graph, labels)
            run.epoch_split = _profiled_epoch(run, mode, seed, settings, train, train_labels, labels, log)
    if any(judged.flags[settings.warmup:]):
        log(f"  seed {seed}: {sum(judged.flags[settings.warmup:])} of {settings.epochs - settings.warmup} timed "
            "epochs flagged by the interference sentinel (left out)")
    return sample_s, judged


def _epoch(run: _Run, mode: str, epoch: int, train, train_labels, labels) -> None:
    """One training epoch of ``run``: the full graph in one step, or every batch of ``epoch``."""
    import torch.nn.functional as F  # noqa: PLC0415 - after the thread settings

    if mode == "full":
        run.optimizer.zero_grad(set_to_none=True)
        out = run.contender.forward(run.model, run.x, run.full)
        F.cross_entropy(out.index_select(0, train), train_labels).backward()
        run.optimizer.step()
        return
    for n_id, blocks, seeds in run.batches[epoch]:
        run.optimizer.zero_grad(set_to_none=True)
        out = run.contender.forward(run.model, _gather(run.rows, n_id), blocks)
        F.cross_entropy(out, labels.index_select(0, seeds)).backward()
        run.optimizer.step()


def _profiled_epoch(run: _Run, mode: str, seed: int, settings: SageSettings, train, train_labels, labels, log):
    """The epoch split (``bench.epoch_split``: sparse, dense and the rest) of one more epoch, run
    under ``torch.profiler`` after the timed ones and the accuracy; None where it fails."""
    import torch  # noqa: PLC0415 - after the thread settings

    from .epoch_split import profile_epoch  # noqa: PLC0415 - with torch

    epoch = settings.epochs - 1
    torch.manual_seed(seed * 100_003 + epoch)
    run.model.train()
    try:
        return profile_epoch(lambda: _epoch(run, mode, epoch, train, train_labels, labels))
    except Exception as error:  # the times stand without it
        log(f"  epoch split of {run.contender!r}: {type(error).__name__}: {error}")
        return None


def _accuracy(run: _Run, graph: TrainingGraph, labels) -> dict:
    import torch  # noqa: PLC0415 - after the thread settings

    model = run.eval_model
    model.eval()
    with torch.no_grad():
        predicted = run.contender.forward(model, run.x, run.full).argmax(dim=1)
    return {split: float((predicted[torch.from_numpy(nodes)] == labels[torch.from_numpy(nodes)]).float().mean())
            for split, nodes in (("val", graph.val), ("test", graph.test))}


def _finish(graph, dataset, mode, name, seed, run: _Run, settings, sample_s, provenance, judged: _Judged) -> dict:
    if run.status != "ok":
        return _record(dataset, mode, name, seed, graph, settings, status=run.status, reason=run.reason,
                       provenance=provenance)
    timed, interference = judged.kept(run.epoch_s, settings.warmup)
    median = float(np.median(timed))
    accuracy = run.accuracy if graph.labelled else {"val": None, "test": None}
    return _record(dataset, mode, name, seed, graph, settings, status="ok", provenance=provenance,
                   epoch_s=run.epoch_s, median_ms=median * 1e3, mean_ms=float(np.mean(timed)) * 1e3,
                   first_epoch_s=run.epoch_s[0], compile_s=max(0.0, run.epoch_s[0] - median),
                   kernel_compile_s=run.kernel_compile_s if isinstance(run.contender, SparsetirSage) else None,
                   setup_s=run.setup_s, sample_s=sample_s, test_acc=accuracy["test"], val_acc=accuracy["val"],
                   batches=len(run.batches[0]) if run.batches else None, epoch_split=run.epoch_split,
                   kept_s=timed, interference=interference)


def _record(dataset, mode, contender, seed, graph, settings, *, status, reason=None, provenance=None, **fields) -> dict:
    """A record of the harness's schema (``bench.records``: ``stats`` over the epochs after warm-up,
    ``times.compile_s`` and ``setup_s``, the case ``"<dataset> (<mode>)"``, ``feat`` the hidden size),
    plus the training fields: mode, seed, accuracy, every epoch's seconds, sparsetir's kernel seconds."""
    from .records import make_record  # noqa: PLC0415 - with the rest of the harness

    extra = {"loadavg": list(os.getloadavg()), "threads_torch": _torch_threads()}
    kept, interference = fields.pop("kept_s", None), fields.pop("interference", None)
    if kept is None and fields.get("epoch_s"):
        kept = fields["epoch_s"][settings.warmup:]
    stats = None
    if status == "ok":
        samples = [float(t) for t in kept]
        stats = {"median": float(np.median(samples)), "p20": float(np.percentile(samples, 20)),
                 "p80": float(np.percentile(samples, 80)), "mean": float(np.mean(samples)),
                 "min": float(np.min(samples)), "n": len(samples), "samples": samples,
                 **({"interference": interference} if interference is not None else {})}
    record = make_record(
        experiment="sage", op="sage", device="cpu", dataset=dataset, feat=settings.hidden, contender=contender,
        status=status, reason=reason, stats=stats, variant=mode,
        shape=None if graph is None else graph.adj_t.shape, nnz=None if graph is None else int(graph.adj_t.nnz),
        times={"compile_s": fields.get("compile_s"), "setup_s": fields.get("setup_s")},
        provenance=provenance(device="cpu", flush=False, extra=extra) if provenance else extra)
    record.update({
        "case": f"{dataset} ({mode})", "mode": mode, "seed": seed,
        "labelled": None if graph is None else graph.labelled,
        "nodes": None if graph is None else int(graph.adj_t.shape[0]),
        "edges": None if graph is None else int(graph.adj_t.nnz),
        "features": None if graph is None else int(graph.features.shape[1]),
        "classes": None if graph is None else graph.num_classes,
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()},
        "epoch_s": None, "median_ms": None, "mean_ms": None, "first_epoch_s": None, "compile_s": None,
        "kernel_compile_s": None, "setup_s": None, "sample_s": None, "test_acc": None, "val_acc": None,
        "batches": None, "epoch_split": None,
    })
    record.update(fields)
    for key in ("median_ms", "mean_ms", "compile_s"):
        value = record[key]
        if value is not None and not (isinstance(value, float) and math.isfinite(value) and value >= 0):
            raise ValueError(f"record {key} must be a finite non-negative number, got {value!r}")
    return record


def _torch_threads():
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def summary(records: list[dict]) -> str:
    """One line per record: ms per epoch and accuracy, or why it did not run."""
    lines = []
    for r in records:
        if r["status"] == "ok":
            accuracy = f"test acc {r['test_acc']:.3f}" if r["test_acc"] is not None else "time only"
            split = r.get("epoch_split")
            shares = (f"  sparse {split['sparse']:.0%} dense {split['dense']:.0%} rest {split['rest']:.0%}"
                      if split else "")
            lines.append(f"  {r['dataset']:<12} {r['mode']:<9} seed {r['seed']} {r['contender']:<20} "
                         f"{r['median_ms']:9.1f} ms/epoch  compile {r['compile_s']:6.2f} s  {accuracy}{shares}")
        else:
            lines.append(f"  {r['dataset']:<12} {r['mode']:<9} seed {r['seed']} {r['contender']:<20} {r['reason']}")
    return "\n".join(lines)
