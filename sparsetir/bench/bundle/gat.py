"""GAT in a GPU bundle: the fused GAT layer's kernels built here, a training step checked and timed on the GPU host.

Build (compile host, :func:`build_gat_section`): for each graph of the ``gat`` family (``bench.gat.gat_task``:
pubmed, amazon_cs, coauthor_cs, ...) its structure (adj_t CSR, before self-loops) goes to
``inputs/gat-<dataset>.npz``, and the model's two layers (``GATConv(in, hidden, heads)``,
``GATConv(hidden * heads, classes, heads=1, concat=False)``) get the op's kernel set each
(``ops.edge_softmax.edge_softmax_kernels``: forward, backward, aggregate; compiled for the bundle's
target with real device code, for symbolic sizes, so one set serves every graph with that
(heads, features)), exported runtime-only (``runtime.edge_softmax.export_kernels``: each manifest
carries its ``function`` spec) into the bundle's content-addressed stores. The manifest gets a
section ``gat``: heads, hidden, seed, baselines, the kernel sets, the cases.

Run (GPU host, TVM runtime only, :func:`run_gat_cases`): per graph the inputs are rebuilt from the seed
(``reference.gat.gat_inputs``: features, PyG-keyed weights, the loss weighting), each layer's set is
loaded (``runtime.edge_softmax.load_kernels``) and composed as ``nn.GATConv`` composes it (projection,
the two score halves, ``edge_softmax_aggregate``, heads concatenated or averaged, bias; ELU between
the layers). One training step (forward, then the gradients of ``sum(out * G)`` for every weight) of
sparsetir's model and of each baseline (the ``gat`` family's training contenders, ``baselines.pyg``'s
``pyg-gatconv`` on the device; DGL has no GPU build and says so) is checked against the float64
reference (``reference.gat.gat_reference``: the output and the weights' gradients), then timed with
the one timer (CUDA events, L2 flush); on a GPU each row's peak memory over one step is recorded.
Dropout is 0 here (a check needs equal results); the CPU benchmark (``bench.gat``) trains at 0.6.
Records go to ``<out>/records/gat/<dataset>.json``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp

import baselines as declared

from ...data import dataset_slug
from ...reference import Case
from ...reference.gat import CHECKED_KEYS, LAYER_KEYS, NEGATIVE_SLOPE, GATInputs, gat_flatten, gat_inputs, gat_reference
from ...runtime.edge_softmax import KINDS, EdgeSoftmaxStructure, edge_softmax_aggregate, load_kernels, with_self_loops
from ..case_runner import status_of
from ..engine import Row, baseline_row, prepare, time_rows
from ..records import make_record
from .in_turn import failed_case, row_times, run_cases_in_turn
from .manifest import bundle_baselines
from .parts import BundlePart

__all__ = ["PART", "build_gat_section", "gat_model_step", "run_gat_cases"]

_FAMILY = "gat"  # the baselines' declarations (baselines.variants), and their library references
SPARSETIR = "sparsetir"


def _set_key(heads: int, feat: int) -> str:
    return f"h{heads}f{feat}"


def _check_positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"the GAT bundle's {name} must be a positive int, got {value!r}")
    return value


# ---------------------------------------------------------------- build (compile host)


def _store_manifest(staging: Path, library: Path) -> str:
    """An exported function's manifest in ``candidates/``, by content; its relative path."""
    text = library.with_name(library.name + ".json").read_text()
    relative = f"candidates/{hashlib.sha256(text.encode()).hexdigest()[:20]}.json"
    if not (staging / relative).exists():
        (staging / relative).write_text(text)
    return relative


def build_gat_section(staging: Path, datasets: Sequence[str], *, heads: int = 8, hidden: int = 8, target,
                      seed: int, scratch: Path, store_library: Callable, store_candidate_files: Callable = None,
                      baselines: Sequence[str] | None = None,
                      say: Callable[[str], None] = lambda message: None) -> dict:
    """Compile the GAT kernel sets of ``datasets`` into the bundle being staged; the manifest's ``gat`` section.

    ``store_library`` is the bundle's content-addressed library store (``build._store_library``);
    ``store_candidate_files`` is not needed (the functions have no structure sidecar)."""
    from ...backend import device_of, normalize_target  # noqa: PLC0415 - compile host only
    from ...ops.edge_softmax import edge_softmax_kernels  # noqa: PLC0415 - the runner never imports this
    from ...runtime.edge_softmax import export_kernels  # noqa: PLC0415
    from ..gat import GATSettings, gat_task  # noqa: PLC0415

    heads, hidden = _check_positive("heads", heads), _check_positive("hidden", hidden)
    if isinstance(datasets, str) or not datasets:
        raise ValueError(f"the GAT bundle needs a list of graphs, got {datasets!r}")
    baselines = bundle_baselines(_FAMILY, baselines, device_of(normalize_target(target)))
    sets, cases = {}, []
    for dataset in dict.fromkeys(datasets):
        started = time.perf_counter()
        task = gat_task(dataset, GATSettings(hidden=hidden, heads=heads, seed=seed))
        adj_t = task.graph["adj_t"]
        if adj_t.shape[0] != adj_t.shape[1]:
            raise ValueError(f"{dataset} is {adj_t.shape[0]} x {adj_t.shape[1]}: the GAT model needs a graph")
        relpath = f"inputs/gat-{dataset_slug(dataset)}.npz"
        np.savez_compressed(staging / relpath, indptr=adj_t.indptr.astype(np.int64),
                            indices=adj_t.indices.astype(np.int64))
        layers = []
        for layer_heads, feat in ((heads, hidden), (1, int(task.dims["classes"]))):
            key = _set_key(layer_heads, feat)
            if key not in sets:
                compile_started = time.perf_counter()
                kernels = edge_softmax_kernels(layer_heads, feat, negative_slope=NEGATIVE_SLOPE, dropout=False,
                                               dtype="float32", target=target)
                compile_s = time.perf_counter() - compile_started
                functions = {}
                for kind, path in export_kernels(kernels, scratch / f"gat-{key}").items():
                    library, _ = store_library(staging, path)
                    functions[kind] = {"library": library, "manifest": _store_manifest(staging, path)}
                sets[key] = {"heads": layer_heads, "feat": feat, "functions": functions, "compile_s": compile_s}
            layers.append(key)
        cases.append({"dataset": dataset, "input": relpath, "nodes": int(adj_t.shape[0]), "edges": int(adj_t.nnz),
                      "in_features": int(task.dims["in"]), "classes": int(task.dims["classes"]),
                      "labelled": bool(task.labelled), "layers": layers})
        say(f"gat {dataset}: {adj_t.shape[0]:,} nodes, {adj_t.nnz:,} edges, layers {layers} in "
            f"{time.perf_counter() - started:.1f} s")
    return {"heads": heads, "hidden": hidden, "seed": seed, "negative_slope": NEGATIVE_SLOPE,
            "baselines": list(baselines), "kernel_sets": sets, "cases": cases}


# ---------------------------------------------------------------- run (GPU host, runtime only)


def load_gat_inputs(bundle: Path, section: dict, case: dict) -> GATInputs:
    """The case's structure and its inputs, rebuilt from the seed."""
    with np.load(bundle / case["input"], allow_pickle=False) as arrays:
        indptr, indices = arrays["indptr"], arrays["indices"]
    return gat_inputs(indptr, indices, case["in_features"], heads=section["heads"], hidden=section["hidden"],
                      classes=case["classes"], seed=section["seed"])


def load_kernel_set(bundle: Path, section: dict, key: str, scratch: Path, assemble: Callable):
    """A layer's kernel set, linked from the bundle's stores and loaded with the runtime (digests checked)."""
    functions = section["kernel_sets"][key]["functions"]
    return load_kernels({kind: assemble(bundle, {"id": f"gat-{key}-{kind}", **functions[kind]}, scratch)
                         for kind in KINDS})


def _gat_layer(kernels, structure, x, params: dict, layer: int, heads: int, channels: int, concat: bool):
    """One ``GATConv`` layer as ``nn.GATConv`` composes it, on a loaded kernel set."""
    weight, att_src, att_dst, bias = (params[f"convs.{layer}.{key}"] for key in LAYER_KEYS)
    h = (x @ weight.T).view(-1, heads, channels)
    out, _alpha = edge_softmax_aggregate(kernels, structure, h, (h * att_src).sum(-1), (h * att_dst).sum(-1))
    return (out.reshape(-1, heads * channels) if concat else out.mean(dim=1)) + bias


def gat_model_step(sets: Sequence, structure: EdgeSoftmaxStructure, inputs: GATInputs, x, params: dict, G):
    """sparsetir's training step: the two layers (ELU between), then the gradients of ``sum(out * G)``
    for :data:`~sparsetir.reference.gat.CHECKED_KEYS`; the checked vector (``reference.gat.gat_flatten``)."""
    import torch  # noqa: PLC0415 - the GPU host has torch; the runner imports it after the thread settings

    h = torch.nn.functional.elu(_gat_layer(sets[0], structure, x, params, 0, inputs.heads, inputs.hidden, True))
    out = _gat_layer(sets[1], structure, h, params, 1, 1, inputs.classes, False)
    grads = torch.autograd.grad((out * G).sum(), [params[key] for key in CHECKED_KEYS])
    return gat_flatten(out.detach(), grads)


def candidate_factory(sets: Sequence, inputs: GATInputs, device: str):
    """``factory() -> run``: the structure with PyG's self-loops, the features and weights on the device."""
    import torch  # noqa: PLC0415

    def factory():
        n = inputs.num_nodes
        structure = EdgeSoftmaxStructure.from_csr(*with_self_loops(inputs.indptr, inputs.indices, n), n, device)
        params = {key: torch.from_numpy(value).to(device).requires_grad_() for key, value in inputs.state.items()}
        x, G = torch.from_numpy(inputs.X).to(device), torch.from_numpy(inputs.G).to(device)
        return lambda: gat_model_step(sets, structure, inputs, x, params, G)

    return factory


def baseline_step(inputs: GATInputs, device: str):
    """``wrap(contender) -> run``: a ``gat`` family training contender (``model``, ``structure``, ``forward``;
    ``parameter_name`` where its model does not use PyG's keys) built on the inputs, one step per call."""
    import torch  # noqa: PLC0415

    def wrap(contender):
        model = contender.model(inputs.dims, {key: torch.from_numpy(value) for key, value in inputs.state.items()})
        model = model.to(device)
        n = inputs.num_nodes
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(inputs.indptr))
        adj_t = sp.csr_matrix((np.ones(inputs.indices.shape[0], np.float32), inputs.indices, inputs.indptr),
                              shape=(n, n))
        task = SimpleNamespace(graph={"edge_index": torch.from_numpy(np.stack([inputs.indices, rows])),
                                      "adj_t": adj_t})
        structure = contender.structure(task)
        name_of = getattr(contender, "parameter_name", lambda key: key)
        named = dict(model.named_parameters())
        checked = [named[name_of(key)] for key in CHECKED_KEYS]
        x, G = torch.from_numpy(inputs.X).to(device), torch.from_numpy(inputs.G).to(device)

        def run():
            out = contender.forward(model, structure, x)
            return gat_flatten(out.detach(), torch.autograd.grad((out * G).sum(), checked))

        return run

    return wrap


def _peak_memory(run, device: str) -> int | None:
    """The most bytes the CUDA caching allocator held during one call beyond what it held before (None on a CPU)."""
    if device != "cuda":
        return None
    import torch  # noqa: PLC0415

    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    run()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated() - before)


def _sizes(inputs: GATInputs, edges: int) -> tuple[int, int]:
    """``(min_bytes, flops)`` of one step: the features read once, the structure (with self-loops) read by the
    forward and the backward, the output written; the projections (forward, the weights' gradients, the second
    layer's input gradient) and the edge coefficients' per-edge work (forward 2 x width, backward 4 x width)."""
    n, f_in, width, classes = inputs.num_nodes, int(inputs.X.shape[1]), inputs.heads * inputs.hidden, inputs.classes
    min_bytes = n * f_in * 4 + 2 * (edges * 8 + (n + 1) * 8) + n * classes * 4
    flops = 2 * n * (f_in * width + width * classes) * 2 + 2 * n * width * classes + 6 * edges * (width + classes)
    return int(min_bytes), int(flops)


def run_gat_case(bundle: Path, section: dict, case: dict, scratch: Path, assemble: Callable, *, device: str,
                 bandwidth: dict, timing, where: dict) -> list[dict]:
    """Check and time one graph's training step, sparsetir's and the baselines'; one validated record each."""
    inputs = load_gat_inputs(bundle, section, case)
    reference, tolerance = gat_reference(inputs)
    edges = int(inputs.indices.shape[0]) + inputs.num_nodes  # at most, with one self-loop per node
    min_bytes, flops = _sizes(inputs, edges)
    bench_case = Case((inputs.X,), reference, tolerance, min_bytes)
    sets = [load_kernel_set(bundle, section, key, scratch, assemble) for key in case["layers"]]
    rows = [prepare(Row(SPARSETIR, "compile"), candidate_factory(sets, inputs, device), bench_case)]
    rows += [baseline_row(entry, bench_case, device, inputs=(), wrap=baseline_step(inputs, device))
             for entry in declared.variants(_FAMILY, section["baselines"]).values()]
    time_rows(_FAMILY, rows, bench_case, bandwidth["bytes_per_s"], timing, device)
    compile_s = sum(section["kernel_sets"][key].get("compile_s") or 0.0 for key in dict.fromkeys(case["layers"]))
    records = []
    for row in rows:
        status, reason = status_of(row)
        ours = row.contender == SPARSETIR
        record = make_record(
            experiment=_FAMILY, op=_FAMILY, device=device, dataset=case["dataset"],
            feat=section["heads"] * section["hidden"], contender=row.contender, status=status, reason=reason,
            stats=row.stats.to_dict() if row.stats else None, shape=(inputs.num_nodes, inputs.num_nodes),
            nnz=case["edges"], variant="fused edge_softmax_aggregate" if ours else None,
            times=row_times(row, {"compile_s": compile_s, "convert_s": None} if ours else None),
            min_bytes=min_bytes, flops=flops, copy_bytes_per_s=bandwidth["bytes_per_s"], provenance=where)
        record["gat"] = {"case": "training step (forward and the weights' gradients), dropout 0",
                         "kind": "sparsetir" if ours else "baseline", "heads": section["heads"],
                         "hidden": section["hidden"], "classes": case["classes"], "in_features": case["in_features"],
                         "features": "seeded standard normal", "speedup_vs_best": row.speedup_vs_best,
                         "peak_memory_bytes": _peak_memory(row.run, device) if row.run is not None else None}
        if ours:
            record["gat"]["kernel_sets"] = list(case["layers"])
        records.append(record)
    return records


def run_gat_cases(bundle: Path, manifest: dict, out: Path, scratch: Path, assemble: Callable, *, bandwidth: dict,
                  timing, where: dict, deadline_s: float, say: Callable[[str], None]) -> list[str]:
    """Every GAT case of the bundle that fits before ``deadline_s`` (``time.monotonic()``); the record files."""
    section, device = manifest["gat"], manifest["device"]
    failed = failed_case(experiment=_FAMILY, op=_FAMILY, device=device, feat=section["heads"] * section["hidden"],
                         where=where)
    return run_cases_in_turn(
        section["cases"], lambda case: run_gat_case(bundle, section, case, scratch, assemble, device=device,
                                                    bandwidth=bandwidth, timing=timing, where=where),
        out, family=_FAMILY, file_of=lambda case: f"records/gat/{dataset_slug(case['dataset'])}.json",
        label_of=lambda case: case["dataset"], failed=failed, deadline_s=deadline_s, say=say)


def _build(staging: Path, settings: dict, **stores) -> dict:
    return build_gat_section(staging, settings["datasets"], heads=settings.get("heads", 8),
                             hidden=settings.get("hidden", 8), baselines=settings.get("baselines"), **stores)


def _add_arguments(parser) -> None:
    parser.add_argument("--gat-dataset", action="append", default=[], metavar="GRAPH",
                        help="also GAT training-step kernels on this graph, e.g. pubmed (repeatable)")
    parser.add_argument("--gat-heads", type=int, default=8, help="the GAT model's heads (default 8)")
    parser.add_argument("--gat-hidden", type=int, default=8, help="the GAT model's features per head (default 8)")


PART = BundlePart("gat", "the GAT kernel sets", _build, run_gat_cases, order=4, dataset_key="dataset",
                  add_arguments=_add_arguments,
                  from_arguments=lambda args: {"datasets": args.gat_dataset, "heads": args.gat_heads,
                                               "hidden": args.gat_hidden} if args.gat_dataset else None)
