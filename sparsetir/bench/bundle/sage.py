"""GraphSAGE's aggregation kernels in a GPU bundle: built here, each checked and timed on the GPU host.

The kernels are ``ops.aggregate``'s stages, the ones ``torch_aggregate`` composes into
``spmm_reduce`` (max/min aggregation and its gradient) and the mean without a value array (with
and without the dropout inside it, ``GraphSAGE(dropout_in_aggregation=True)``):

=====================  ===========================================  ==============================
stage                  what                                         baselines (family key)
=====================  ===========================================  ==============================
``reduce-max/-min``    the forward (0 on an empty row, as the op)   ``aggregate-max`` / ``-min``
``ties``, ``spread``   the max's gradient: its ties, then A^T       (none: the stage alone)
``rows``               the mean, ``1 / degree`` as a row scale      ``aggregate-mean``
``columns``            its gradient over A^T                        (none)
``rows_masked``        the mean of B under a dropout keep mask      ``aggregate-mean-masked``
``columns_masked``     its gradient over A^T, masked                (none)
=====================  ===========================================  ==============================

Build (compile host, :func:`build_sage_section`): per graph its pattern goes to
``inputs/sage-<dataset>.npz``; each stage is compiled for the bundle's target with real device
code (for symbolic sizes, so one library serves every graph), bound to the graph's structure (A^T's
for the stages over A^T), and stored through the bundle's content-addressed stores. The manifest
gets a section ``sage``: feat, seed, baselines (per key), cases.

Run (GPU host, TVM runtime only, :func:`run_sage_cases`): per graph and stage the inputs are drawn
from the seed (``reference.aggregate.stage_inputs``), the loaded kernel and the key's baselines are
checked against the float64 reference (``stage_reference``), then timed with the one timer (CUDA
events and an L2 flush on a GPU). Records (experiment ``sage-aggregate``) go to
``<out>/records/sage/<dataset>.json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import baselines as declared

from ...data import dataset_slug
from ...reference import Case
from ...reference.aggregate import TRANSPOSED_STAGES, stage_inputs, stage_reference
from ...runtime import load
from ..case_runner import status_of
from ..engine import Row, baseline_row, prepare, time_rows
from ..records import make_record
from .in_turn import failed_case, row_times, run_cases_in_turn
from .parts import BundlePart

__all__ = ["PART", "STAGES", "build_sage_section", "run_sage_cases"]

EXPERIMENT = "sage-aggregate"
#: label -> (stage, reducer, the baselines' family key or None)
STAGES = {"reduce-max": ("reduce", "max", "aggregate-max"), "reduce-min": ("reduce", "min", "aggregate-min"),
          "ties": ("ties", "max", None), "spread": ("spread", "max", None),
          "rows": ("rows", "max", "aggregate-mean"), "columns": ("columns", "max", None),
          "rows_masked": ("rows_masked", "max", "aggregate-mean-masked"), "columns_masked": ("columns_masked", "max", None)}
BASELINE_KEYS = tuple(dict.fromkeys(key for _, _, key in STAGES.values() if key))
DEFAULT_FEAT = 128  # the sage target's hidden size


def _pattern(indptr: np.ndarray, indices: np.ndarray, shape) -> sp.csr_matrix:
    return sp.csr_matrix((np.ones(indices.shape[0], np.float32), indices, indptr), shape=tuple(shape))


def section_baselines(names: Sequence[str] | None, device: str) -> dict[str, list[str]]:
    """key -> the baselines of that key a bundle carries: by default those that run by default on ``device``;
    ``names``: variant or library names, each of some key (``ValueError`` for a name of none)."""
    if names is None:
        return {key: declared.default_names(key, device) for key in BASELINE_KEYS}
    if isinstance(names, str):
        raise ValueError(f"the sage bundle's baselines must be a list of names, got {names!r}")
    chosen, used = {}, set()
    for key in BASELINE_KEYS:
        known = declared.variants(key)
        libraries = {entry.library for entry in known.values()}
        mine = [name for name in names if name in known or name in libraries]
        used.update(mine)
        chosen[key] = list(declared.variants(key, mine)) if mine else []
    unknown = [name for name in names if name not in used]
    if unknown:
        raise ValueError(f"unknown sage bundle baseline(s) {unknown}; known: "
                         f"{', '.join(name for key in BASELINE_KEYS for name in declared.variants(key))}")
    return chosen


# ---------------------------------------------------------------- build (compile host)


def build_sage_section(staging: Path, datasets: Sequence[str], *, feat: int = DEFAULT_FEAT, target, seed: int,
                       scratch: Path, store_library: Callable, store_candidate_files: Callable,
                       baselines: Sequence[str] | None = None,
                       say: Callable[[str], None] = lambda message: None) -> dict:
    """Compile every aggregation stage on each of ``datasets`` into the bundle being staged; the manifest's
    ``sage`` section."""
    from ...backend import device_of, normalize_target  # noqa: PLC0415 - compile host only
    from ...formats import read_sparse_input  # noqa: PLC0415
    from ...ops.aggregate import aggregation_kernel  # noqa: PLC0415 - the runner never imports this
    from ..datasets import load_matrix  # noqa: PLC0415

    if isinstance(feat, bool) or not isinstance(feat, int) or feat < 1:
        raise ValueError(f"the sage bundle's feat must be a positive int, got {feat!r}")
    if isinstance(datasets, str) or not datasets:
        raise ValueError(f"the sage bundle needs a list of graphs, got {datasets!r}")
    target = normalize_target(target)
    chosen = section_baselines(baselines, device_of(target))
    cases = []
    for dataset in dict.fromkeys(datasets):
        started = time.perf_counter()
        A = load_matrix(dataset, seed)
        A = _pattern(A.indptr, A.indices, A.shape)
        relpath = f"inputs/sage-{dataset_slug(dataset)}.npz"
        np.savez_compressed(staging / relpath, indptr=A.indptr, indices=A.indices,
                            shape=np.asarray(A.shape, dtype=np.int64))
        converting = time.perf_counter()
        structures = {False: read_sparse_input(A, canonical=True),
                      True: read_sparse_input(A.T.tocsr(), canonical=True)}
        convert_s = time.perf_counter() - converting
        kernels = {}
        for label, (stage, reducer, _key) in STAGES.items():
            compiling = time.perf_counter()
            kernel = aggregation_kernel(stage, reducer, structures[stage in TRANSPOSED_STAGES], feat, "float32",
                                        target)
            compile_s = time.perf_counter() - compiling
            library, _ = store_library(staging, Path(kernel.function.library))
            manifest_rel, structure_rel = store_candidate_files(staging, kernel, scratch)
            kernels[label] = {"library": library, "manifest": manifest_rel, "structure": structure_rel,
                              "compile_s": compile_s, "convert_s": convert_s}
        cases.append({"dataset": dataset, "input": relpath, "shape": list(A.shape), "nnz": int(A.nnz),
                      "kernels": kernels})
        say(f"sage {dataset}: {len(kernels)} aggregation stages in {time.perf_counter() - started:.1f} s")
    return {"feat": feat, "seed": seed, "baselines": chosen, "cases": cases}


# ---------------------------------------------------------------- run (GPU host, runtime only)


def stage_factory(library: Path, stage: str, inputs: dict, empty_rows: np.ndarray, device: str):
    """``factory() -> run``: the stage's kernel loaded, its inputs on the device once, run into a preallocated
    output; the reduce stage sets an empty row to 0 after it, as ``ops.spmm_reduce`` does."""
    import torch  # noqa: PLC0415 - the run host has torch; the runner imports it after the thread settings

    def factory():
        kernel = load(library)
        arguments = [torch.from_numpy(np.ascontiguousarray(value)).to(device) for value in inputs.values()]
        out = torch.empty(kernel.output_shape(), dtype=torch.float32, device=device)
        empty = torch.from_numpy(empty_rows).to(device)

        def run():
            kernel(*arguments, out=out)
            if stage == "reduce" and empty.numel():
                out.index_fill_(0, empty, 0)
            return out

        return run

    return factory


def _min_bytes(stage: str, A: sp.csr_matrix, feat: int) -> int:
    """The structure (indptr, indices) read once, each dense operand read once, the result written once."""
    m, n = A.shape
    dense = {"reduce": n + m, "ties": n + 2 * m, "spread": 2 * n + 2 * m, "rows": n + m, "columns": m + n,
             "rows_masked": n + m, "columns_masked": m + n}[stage] * feat * 4
    masks = n * feat if stage.endswith("_masked") else 0
    return int(A.nnz * 4 + (max(m, n) + 1) * 4 + dense + masks)


def run_sage_case(bundle: Path, section: dict, case: dict, scratch: Path, assemble: Callable, *, device: str,
                  bandwidth: dict, timing, where: dict) -> list[dict]:
    """Check and time every stage on one graph, with its key's baselines; one validated record per row."""
    with np.load(bundle / case["input"], allow_pickle=False) as arrays:
        A = _pattern(arrays["indptr"], arrays["indices"], arrays["shape"])
    feat = int(section["feat"])
    empty_rows = np.flatnonzero(np.diff(A.indptr) == 0).astype(np.int64)
    records = []
    for label, entry in case["kernels"].items():
        stage, reducer, key = STAGES[label]
        inputs = stage_inputs(stage, reducer, A, feat, np.random.default_rng(section["seed"]))
        reference, tolerance = stage_reference(stage, reducer, A, inputs, empty=0.0)
        min_bytes = _min_bytes(stage, A, feat)
        bench_case = Case(tuple(inputs.values()), reference, tolerance, min_bytes)
        library = assemble(bundle, {"id": f"sage-{dataset_slug(case['dataset'])}-{label}", **entry}, scratch)
        ours = Row(f"sparsetir[{label}]", "compile")
        rows = [prepare(ours, stage_factory(library, stage, inputs, empty_rows, device), bench_case)]
        if key is not None:  # a baseline takes A, B and (the masked mean) the keep mask; the row scale is its own
            given = (A, inputs["B"], *([inputs["M"]] if "M" in inputs else []))
            rows += [baseline_row(baseline, bench_case, device, inputs=given)
                     for baseline in declared.variants(key, section["baselines"].get(key, [])).values()]
        time_rows(key or f"aggregate-{label}", rows, bench_case, bandwidth["bytes_per_s"], timing, device)
        for row in rows:
            status, reason = status_of(row)
            mine = row is ours
            record = make_record(
                experiment=EXPERIMENT, op=f"aggregate-{label}", device=device, dataset=case["dataset"], feat=feat,
                contender=row.contender, status=status, reason=reason,
                stats=row.stats.to_dict() if row.stats else None, shape=A.shape, nnz=int(A.nnz),
                variant=f"ops.aggregate {stage}" if mine else None, times=row_times(row, entry if mine else None),
                min_bytes=min_bytes, flops=2 * int(A.nnz) * feat, copy_bytes_per_s=bandwidth["bytes_per_s"],
                provenance=where)
            record["sage"] = {"stage": stage, "reducer": reducer if stage in ("reduce", "ties", "spread") else None,
                              "kind": "sparsetir" if mine else "baseline", "speedup_vs_best": row.speedup_vs_best,
                              "seed": section["seed"]}
            records.append(record)
    return records


def run_sage_cases(bundle: Path, manifest: dict, out: Path, scratch: Path, assemble: Callable, *, bandwidth: dict,
                   timing, where: dict, deadline_s: float, say: Callable[[str], None]) -> list[str]:
    """Every graph's stages that fit before ``deadline_s`` (``time.monotonic()``); the record files."""
    section, device = manifest["sage"], manifest["device"]
    failed = failed_case(experiment=EXPERIMENT, op="aggregate", device=device, feat=section["feat"], where=where)
    return run_cases_in_turn(
        section["cases"], lambda case: run_sage_case(bundle, section, case, scratch, assemble, device=device,
                                                     bandwidth=bandwidth, timing=timing, where=where),
        out, family="sage", file_of=lambda case: f"records/sage/{dataset_slug(case['dataset'])}.json",
        label_of=lambda case: case["dataset"], failed=failed, deadline_s=deadline_s, say=say)


def _build(staging: Path, settings: dict, **stores) -> dict:
    return build_sage_section(staging, settings["datasets"], feat=settings.get("feat", DEFAULT_FEAT),
                              baselines=settings.get("baselines"), **stores)


def _add_arguments(parser) -> None:
    parser.add_argument("--sage-dataset", action="append", default=[], metavar="GRAPH",
                        help="also GraphSAGE's aggregation kernels (max/min, the mean, dropout-masked, their "
                             "gradients) on this graph, e.g. pubmed (repeatable)")
    parser.add_argument("--sage-feat", type=int, default=DEFAULT_FEAT,
                        help=f"their feature size (default {DEFAULT_FEAT})")


PART = BundlePart("sage", "the aggregation kernels", _build, run_sage_cases, order=5, dataset_key="dataset",
                  add_arguments=_add_arguments,
                  from_arguments=lambda args: {"datasets": args.sage_dataset, "feat": args.sage_feat}
                  if args.sage_dataset else None)
