"""R-GCN inference in a GPU bundle: candidates built here, checked and timed on the GPU host.

Build (compile host, :func:`build_rgcn_section`): for each relational graph, the graph prepared as
``nn.RGCN`` prepares it (``RGCNGraph``: mean-normalised values, the root weight as one more,
identity relation), and one RGMS kernel per layer shape for each candidate configuration
(relational format x dataflow, up to ``limit``; in a CUDA bundle also the staged tiles on tensor
cores in float16 where the layer shapes are multiples of 16, ``TENSOR_CORE_RGCN_CONFIGS``), compiled
for the bundle's target with real device code. Libraries, kernel manifests and structures go through the bundle's
content-addressed stores (``build.py``); the graph's relational structure goes to
``inputs/rgcn-<dataset>.npz``. The manifest gets a section ``rgcn``: dims, seed, baselines, cases.

Run (GPU host, TVM runtime only, :func:`run_rgcn_cases`): per graph the inputs are rebuilt from
the seed (``reference.rgcn.rgcn_inputs``), each candidate's two layers are loaded
(``runtime.load``) and composed as ``nn.RGCN`` composes them (``kernel(X, [W; root]) + bias``, a
ReLU between the layers), every candidate and baseline (``baselines/rgcn.py`` on the device: PyG
``RGCNConv``/``FastRGCNConv``, the torch ones; DGL has no GPU build and says so) is checked
against the float64 reference, then timed with the one timer (CUDA events, L2 flush). Records
go to ``<out>/records/rgcn/<dataset>.json``, out of ``ingest``'s way (it reads SpMM cases);
``sparsetir.bench.families.rgcn``'s tables read them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import baselines as declared

from ...data import dataset_slug
from ...reference import Case
from ...reference.rgcn import RGCNInputs, RGCNLayerWeights, rgcn_inputs, rgcn_reference
from ...runtime import load
from ...runtime.validate import entry_rows
from ..case_runner import status_of
from ..engine import Row, baseline_row, prepare, time_rows
from ..records import make_record
from .candidates import candidate_dtype, candidate_label, half_precision_case, note_candidate, rounded_to
from .in_turn import failed_case, run_cases_in_turn
from .manifest import bundle_baselines
from .parts import BundlePart

__all__ = ["DEFAULT_RGCN_CONFIGS", "PART", "TENSOR_CORE_RGCN_CONFIGS", "RelationalStructure", "build_rgcn_section", "run_rgcn_cases"]

#: Candidate configurations, in order: the formats x the dataflows of ``ops.rgms``.
DEFAULT_RGCN_CONFIGS = tuple({"format": fmt, "dataflow": dataflow} for fmt in ("csf", "relcsr")
                             for dataflow in ("aggregate", "edge", "transform"))
#: A CUDA bundle's candidates beside them where every layer shape is a multiple of 16: the staged tiles of
#: ``schedule/staged_cuda.py`` on tensor cores (``ops.rgms.default_format``'s CUDA choice, 512 parts), float16
TENSOR_CORE_RGCN_CONFIGS = ({"format": "rtile:16:512", "dataflow": "edge", "dtype": "float16"},)
_FAMILY = "rgcn"  # the baselines' declarations (baselines.variants), and their library references


@dataclass
class RelationalStructure:
    """A relation-major stacked CSR (R relations of one ``m x n`` shape) with the interface
    ``rgcn_inputs``/``rgcn_reference`` and the baselines read, without importing ``formats`` (TVM)."""

    shape: tuple
    num_relations: int
    indptr: np.ndarray
    indices: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    @property
    def values(self) -> np.ndarray:
        return np.ones(self.nnz, np.float32)

    def coordinates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        m = max(int(self.shape[0]), 1)
        stacked = entry_rows(np.asarray(self.indptr, dtype=np.int64))
        return stacked // m, stacked % m, np.asarray(self.indices, dtype=np.int64)


def _layer_shapes(dims: Sequence[int]) -> list[tuple[int, int]]:
    return list(dict.fromkeys(zip(dims[:-1], dims[1:])))


def _shape_key(shape: tuple[int, int]) -> str:
    return f"{shape[0]}x{shape[1]}"


# ---------------------------------------------------------------- build (compile host)


def build_rgcn_section(staging: Path, datasets: Sequence[str], *, dims: Sequence[int] = (32, 32, 32), target,
                       seed: int, scratch: Path, store_library: Callable, store_candidate_files: Callable,
                       limit: int = len(DEFAULT_RGCN_CONFIGS), baselines: Sequence[str] | None = None,
                       say: Callable[[str], None] = lambda message: None) -> dict:
    """Compile the R-GCN candidates of ``datasets`` into the bundle being staged; the manifest's ``rgcn`` section.

    ``store_library`` and ``store_candidate_files`` are the bundle's content-addressed stores
    (``build._store_library``, ``build._store_candidate_files``)."""
    from ...backend import device_of, normalize_target  # noqa: PLC0415 - compile host only
    from ...nn.rgcn import RGCNGraph  # noqa: PLC0415 - compile host only: the runner never imports this
    from ...ops import compile_rgms  # noqa: PLC0415
    from ..families.rgcn import check_dims, load_graph  # noqa: PLC0415

    dims = check_dims(dims)
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"the R-GCN candidate limit must be a positive int, got {limit!r}")
    baselines = bundle_baselines(_FAMILY, baselines, device_of(normalize_target(target)))
    cases = []
    for dataset in dict.fromkeys(datasets):
        started = time.perf_counter()
        graph = load_graph(dataset, seed)
        slug = dataset_slug(dataset)
        relpath = f"inputs/rgcn-{slug}.npz"
        np.savez_compressed(staging / relpath, indptr=graph.indptr, indices=graph.indices,
                            shape=np.asarray(graph.shape, dtype=np.int64),
                            num_relations=np.asarray(graph.num_relations, dtype=np.int64))
        prepared = RGCNGraph(graph)
        candidates = []
        for index, config in enumerate(rgcn_configs(device_of(normalize_target(target)), dims, limit)):
            layers = {}
            options = {key: value for key, value in config.items() if key != "dtype"}
            for shape in _layer_shapes(dims):
                kernel = compile_rgms(prepared.matrix, *shape, target=target, dtype=candidate_dtype(config), **options)
                library, _ = store_library(staging, Path(kernel.function.library))
                manifest_rel, structure_rel = store_candidate_files(staging, kernel, scratch)
                layers[_shape_key(shape)] = {"library": library, "manifest": manifest_rel, "structure": structure_rel,
                                             "compile_s": kernel.timings.get("compile_s"),
                                             "convert_s": kernel.timings.get("convert_s")}
            candidates.append({"id": f"rgcn-{slug}-{index:02d}", "config": dict(config), "layers": layers})
        cases.append({"dataset": dataset, "input": relpath, "shape": list(graph.shape),
                      "num_relations": int(graph.num_relations), "nnz": int(graph.nnz), "candidates": candidates})
        say(f"rgcn {dataset}: {len(candidates)} candidates x {len(_layer_shapes(dims))} layer shape(s) in "
            f"{time.perf_counter() - started:.1f} s")
    return {"dims": list(dims), "seed": seed, "baselines": list(baselines), "cases": cases}


def rgcn_configs(device: str, dims: Sequence[int], limit: int = len(DEFAULT_RGCN_CONFIGS)) -> list[dict]:
    """The candidate configurations: the first ``limit`` of ``DEFAULT_RGCN_CONFIGS`` and, on CUDA, the
    tensor-core ones where tensor cores take every layer shape (compile host only)."""
    from ...schedule.staged_cuda import check_tensor_core_tile  # noqa: PLC0415 - compile host only

    configs = list(DEFAULT_RGCN_CONFIGS[:limit])
    if device == "cuda":
        for config in TENSOR_CORE_RGCN_CONFIGS:
            try:
                for f_in, f_out in _layer_shapes(dims):
                    check_tensor_core_tile(16, f_in, f_out, config["dtype"])
            except ValueError:
                continue
            configs.append(dict(config))
    return configs


def rounded_inputs(inputs: RGCNInputs, dtype: str) -> RGCNInputs:
    """The inputs a ``dtype`` candidate is given: features and weights rounded to ``dtype``."""
    return RGCNInputs(inputs.graph, rounded_to(inputs.X, dtype), tuple(
        RGCNLayerWeights(*(rounded_to(a, dtype) for a in (layer.weight, layer.root, layer.bias)))
        for layer in inputs.layers))


# ---------------------------------------------------------------- run (GPU host, runtime only)


def load_structure(bundle: Path, case: dict) -> RelationalStructure:
    with np.load(bundle / case["input"], allow_pickle=False) as arrays:
        return RelationalStructure(tuple(int(v) for v in arrays["shape"]), int(arrays["num_relations"]),
                                   arrays["indptr"], arrays["indices"])


def candidate_factory(libraries: dict, inputs, device: str, dtype: str = "float32"):
    """``factory() -> run``: load each layer's kernel, put the features and the stacked weights
    (``[weight; root]``, the root as the identity relation) on the device in ``dtype``, compose the layers."""
    import torch  # noqa: PLC0415 - the GPU host has torch; the runner imports it after the thread settings

    def on_device(array):
        return torch.from_numpy(np.ascontiguousarray(array)).to(device=device, dtype=getattr(torch, dtype))

    def factory():
        layers = []
        for layer in inputs.layers:
            kernel = load(libraries[_shape_key(layer.weight.shape[1:])])
            stacked = on_device(np.concatenate([layer.weight, layer.root[None]]))
            layers.append((kernel, stacked, on_device(layer.bias)))
        X = on_device(inputs.X)

        def run():
            h = X
            for index, (kernel, stacked, bias) in enumerate(layers):
                h = kernel(h, stacked).add_(bias)
                if index < len(layers) - 1:
                    h = torch.relu(h)
            return h

        return run

    return factory


def run_rgcn_case(bundle: Path, section: dict, case: dict, scratch: Path, assemble: Callable, *, device: str,
                  bandwidth: dict, timing, where: dict) -> list[dict]:
    """Check and time one graph's candidates and baselines; one validated record per contender."""
    graph = load_structure(bundle, case)
    dims = tuple(section["dims"])
    inputs = rgcn_inputs(graph, dims, seed=section["seed"])
    reference, tolerance = rgcn_reference(inputs)
    min_bytes = sum(graph.nnz * 8 + (graph.num_relations * graph.shape[0] + 1) * 4 + graph.shape[1] * f_in * 4
                    + (graph.num_relations + 1) * f_in * f_out * 4 + graph.shape[0] * f_out * 4
                    for f_in, f_out in zip(dims[:-1], dims[1:]))
    bench_case = Case((inputs.X,), reference, tolerance, min_bytes)
    rows, candidates = [], {}
    for candidate in case["candidates"]:
        name = candidate_label(candidate["config"], "format", "dataflow")
        candidates[name] = candidate
        libraries = {shape: assemble(bundle, {"id": f"{candidate['id']}-{shape}", **layer}, scratch)
                     for shape, layer in candidate["layers"].items()}
        dtype = candidate_dtype(candidate["config"])
        check = bench_case
        if dtype != "float32":
            rounded = rounded_inputs(inputs, dtype)
            check = half_precision_case(Case((rounded.X,), *rgcn_reference(rounded), min_bytes), dtype)
        rows.append(prepare(Row(name, "compile"), candidate_factory(libraries, inputs, device, dtype), check))
    rows += [baseline_row(entry, bench_case, device, inputs=(inputs,))
             for entry in declared.variants(_FAMILY, section["baselines"]).values()]
    time_rows(_FAMILY, rows, bench_case, bandwidth["bytes_per_s"], timing, device)
    flops = sum(2 * (graph.nnz + graph.shape[0]) * f_in * f_out for f_in, f_out in zip(dims[:-1], dims[1:]))
    records = []
    for row in rows:
        status, reason = status_of(row)
        candidate = candidates.get(row.contender)
        if candidate is not None:
            layers = candidate["layers"].values()
            times = {"convert_s": sum(layer.get("convert_s") or 0.0 for layer in layers),
                     "compile_s": sum(layer.get("compile_s") or 0.0 for layer in layers), "setup_s": row.setup_s}
        else:
            times = {"convert_s": row.setup_s, "setup_s": row.setup_s}
        record = make_record(
            experiment="rgcn", op="rgcn", device=device, dataset=case["dataset"], feat=dims[0],
            contender=row.contender, status=status, reason=reason, stats=row.stats.to_dict() if row.stats else None,
            shape=graph.shape, nnz=graph.nnz,
            variant=(f"{candidate['config']['format']} dataflow={candidate['config']['dataflow']}"
                     + (f" {candidate['config']['dtype']}" if "dtype" in candidate["config"] else "")) if candidate else None,
            times=times, min_bytes=min_bytes, flops=flops, copy_bytes_per_s=bandwidth["bytes_per_s"],
            provenance=where)
        record["rgcn"] = {"dims": list(dims), "num_relations": graph.num_relations, "seed": section["seed"],
                          "kind": "sparsetir" if candidate else "baseline", "speedup_vs_best": row.speedup_vs_best}
        record["memory"] = None
        note_candidate(record["rgcn"], candidate)
        records.append(record)
    return records


def run_rgcn_cases(bundle: Path, manifest: dict, out: Path, scratch: Path, assemble: Callable, *, bandwidth: dict,
                   timing, where: dict, deadline_s: float, say: Callable[[str], None]) -> list[str]:
    """Every R-GCN case of the bundle that fits before ``deadline_s`` (``time.monotonic()``); the record files."""
    section, device = manifest["rgcn"], manifest["device"]
    failed = failed_case(experiment="rgcn", op="rgcn", device=device, feat=section["dims"][0], where=where)
    return run_cases_in_turn(
        section["cases"], lambda case: run_rgcn_case(bundle, section, case, scratch, assemble, device=device,
                                                     bandwidth=bandwidth, timing=timing, where=where),
        out, family="rgcn", file_of=lambda case: f"records/rgcn/{dataset_slug(case['dataset'])}.json",
        label_of=lambda case: case["dataset"], failed=failed, deadline_s=deadline_s, say=say)


def _build(staging: Path, settings: dict, **stores) -> dict:
    return build_rgcn_section(staging, settings["datasets"], dims=settings.get("dims", (32, 32, 32)),
                              limit=settings.get("limit", len(DEFAULT_RGCN_CONFIGS)),
                              baselines=settings.get("baselines"), **stores)


def _add_arguments(parser) -> None:
    parser.add_argument("--rgcn-dataset", action="append", default=[], metavar="GRAPH",
                        help="also R-GCN inference candidates on this relational graph, e.g. aifb (repeatable)")
    parser.add_argument("--rgcn-dims", type=int, nargs=3, default=[32, 32, 32], metavar=("IN", "HIDDEN", "OUT"),
                        help="the R-GCN model's feature sizes (default 32 32 32)")


PART = BundlePart("rgcn", "the R-GCN candidates", _build, run_rgcn_cases, order=1, dataset_key="dataset",
                  add_arguments=_add_arguments,
                  from_arguments=lambda args: {"datasets": args.rgcn_dataset, "dims": args.rgcn_dims}
                  if args.rgcn_dataset else None)
