"""Sparse 3-D convolution in a GPU bundle: candidates built here, checked and timed on the GPU host.

Build (compile host, :func:`build_conv_section`): each point cloud is voxelised as
``sparsetir.bench.families.conv`` does it (``Scan``); every layer (``c_in:c_out:stride@level``) gets its
kernel map, stored once per (level, stride) in ``inputs/conv-<cloud>-v<size>-l<level>s<stride>.npz``
(coordinates, output coordinates, the pairs grouped by offset, the grid), and one
``sparse_conv3d`` kernel per candidate configuration (csf: output-stationary, no atomics;
relcsr: offsets outermost, gather-GEMM-scatter with atomics; and, in a CUDA bundle, the staged tiles
on tensor cores, float16, where the layer's channels are multiples of 16: ``TENSOR_CORE_CONV_CONFIGS``),
compiled for the bundle's target with real device code. The manifest gets a section ``conv``: cloud, voxel size, seed, baselines,
cases (one per layer).

Run (GPU host, TVM runtime only, :func:`run_conv_cases`): per layer the features and weights are
rebuilt from the seed (``reference.conv.layer_operands``, the CPU benchmark's), each candidate is
loaded (``runtime.load``), the baselines of ``baselines/conv.py`` run on the device (spconv's
CUDA path where the host has spconv, plain torch gather-mm-``index_add_``; TorchSparse and
MinkowskiEngine say why not), everything is checked against the float64 reference, then timed
with the one timer (CUDA events, L2 flush). Kernel maps are set-up on both sides, as on the CPU.
Records go to ``<out>/records/conv/<cloud>-v<size>.json``, in the CPU records' form
(``record["conv"]``), so the family's tables (``bench.report.families``) read them as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import baselines as declared

from ...data import dataset_slug
from ...reference.conv import conv_flops, conv_reference, layer_operands
from ...runtime import load
from ..case_runner import status_of
from ..engine import Row, baseline_row, prepare, time_rows
from ..families.conv import ConvLayer, parse_layer
from ..records import ALL_CONTENDERS, make_record
from .candidates import (
    candidate_dtype,
    candidate_label,
    candidate_variant,
    half_precision_case,
    note_candidate,
    rounded_to,
)
from .in_turn import row_times, run_cases_in_turn
from .manifest import bundle_baselines
from .parts import BundlePart

__all__ = ["DEFAULT_CONV_CONFIGS", "DEFAULT_CONV_LAYERS", "PART", "TENSOR_CORE_CONV_CONFIGS", "build_conv_section",
           "run_conv_cases"]

#: Candidate configurations, in order: the two dataflows of ``ops.sparse_conv3d``.
DEFAULT_CONV_CONFIGS = ({"format": "csf"}, {"format": "relcsr"})
#: A CUDA bundle's candidates beside them, for layers whose channels tensor cores take (multiples of 16): the
#: staged tiles of ``schedule/staged_cuda.py`` (``ops.rgms.default_format``'s CUDA choice, 512 parts), float16
TENSOR_CORE_CONV_CONFIGS = ({"format": "rtile:16:512", "dtype": "float16"},)
DEFAULT_CONV_LAYERS = ("4:32:1@0", "32:32:1@0", "32:64:2@0", "64:64:1@1", "64:128:2@1", "128:128:1@2", "128:256:2@2")
_OP = "conv"


@dataclass
class StoredKernelMap:
    """A kernel map as ``reference.conv`` and ``baselines.conv`` read it, without ``sparsetir.ops`` (TVM)."""

    out_coords: np.ndarray
    in_idx: np.ndarray
    out_idx: np.ndarray
    indptr: np.ndarray
    num_inputs: int

    @property
    def num_outputs(self) -> int:
        return int(self.out_coords.shape[0])

    @property
    def num_pairs(self) -> int:
        return int(self.in_idx.shape[0])


# ---------------------------------------------------------------- build (compile host)


def build_conv_section(staging: Path, clouds: Sequence[str], *, voxel_size: float = 0.2,
                       layers: Sequence[str] = DEFAULT_CONV_LAYERS, target, seed: int, scratch: Path,
                       store_library: Callable, store_candidate_files: Callable,
                       limit: int = len(DEFAULT_CONV_CONFIGS), baselines: Sequence[str] | None = None,
                       say: Callable[[str], None] = lambda message: None) -> dict:
    """Compile the convolution candidates of ``clouds`` into the bundle being staged; the manifest's ``conv``
    section. ``store_library``/``store_candidate_files``: the bundle's content-addressed stores."""
    from ...backend import device_of, normalize_target  # noqa: PLC0415 - compile host only
    from ...data.lidar_scan import check_cloud_name  # noqa: PLC0415
    from ...ops import compile_sparse_conv3d  # noqa: PLC0415 - compile host only: the runner never imports this
    from ..families.conv import Scan  # noqa: PLC0415

    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"the conv candidate limit must be a positive int, got {limit!r}")
    device = device_of(normalize_target(target))
    baselines = bundle_baselines(_OP, baselines, device)
    specs = [parse_layer(text) for text in layers]
    cases = []
    for cloud in dict.fromkeys(clouds):
        check_cloud_name(cloud)
        started = time.perf_counter()
        scan = Scan.load(cloud, voxel_size, seed=seed)
        slug = f"{dataset_slug(cloud)}-v{float(voxel_size):g}"
        stored = {}
        for spec in specs:
            kmap = scan.kernel_map(spec.level, spec.stride)
            relpath = f"inputs/conv-{slug}-l{spec.level}s{spec.stride}.npz"
            if relpath not in stored:
                np.savez_compressed(staging / relpath, coords=scan.coords(spec.level), out_coords=kmap.out_coords,
                                    in_idx=kmap.in_idx, out_idx=kmap.out_idx, indptr=kmap.indptr,
                                    spatial_shape=scan.spatial_shape(spec.level),
                                    geometry=np.asarray([kmap.kernel_size, kmap.stride, kmap.dilation,
                                                         int(kmap.submanifold)], dtype=np.int64))
                stored[relpath] = True
            candidates = []
            for index, config in enumerate(conv_configs(device, spec.c_in, spec.c_out, limit)):
                options = {key: value for key, value in config.items() if key != "dtype"}
                kernel = compile_sparse_conv3d(kmap, spec.c_in, spec.c_out, target=target,
                                               dtype=candidate_dtype(config), **options)
                library, _ = store_library(staging, Path(kernel.function.library))
                manifest_rel, structure_rel = store_candidate_files(staging, kernel, scratch)
                candidates.append({"id": f"conv-{slug}-{spec}-{index:02d}".replace(":", "_").replace("@", "_"),
                                   "config": dict(config), "library": library, "manifest": manifest_rel,
                                   "structure": structure_rel, "compile_s": kernel.timings.get("compile_s"),
                                   "convert_s": kernel.timings.get("convert_s")})
            cases.append({"cloud": cloud, "voxel_size": float(voxel_size), "layer": str(spec), "c_in": spec.c_in,
                          "c_out": spec.c_out, "stride": spec.stride, "level": spec.level, "input": relpath,
                          "map_s": kmap.build_s, "candidates": candidates})
        kernels = sum(len(case["candidates"]) for case in cases if case["cloud"] == cloud)
        say(f"conv {cloud} at {voxel_size:g} m: {len(specs)} layer(s), {kernels} candidate kernels in "
            f"{time.perf_counter() - started:.1f} s")
    return {"seed": seed, "baselines": list(baselines), "cases": cases}


def conv_configs(device: str, c_in: int, c_out: int, limit: int = len(DEFAULT_CONV_CONFIGS)) -> list[dict]:
    """A layer's candidate configurations: the first ``limit`` of ``DEFAULT_CONV_CONFIGS`` and, on CUDA,
    the tensor-core ones where tensor cores take the channels (compile host only)."""
    from ...schedule.staged_cuda import check_tensor_core_tile  # noqa: PLC0415 - compile host only

    configs = list(DEFAULT_CONV_CONFIGS[:limit])
    if device == "cuda":
        for config in TENSOR_CORE_CONV_CONFIGS:
            try:
                check_tensor_core_tile(16, c_in, c_out, config["dtype"])
            except ValueError:
                continue
            configs.append(dict(config))
    return configs


# ---------------------------------------------------------------- run (GPU host, runtime only)


def load_layer(bundle: Path, case: dict, seed: int):
    """The case's layer (``sparsetir.bench.families.conv.ConvLayer``, as the baselines read it), its operands rebuilt
    from the seed as the CPU benchmark builds them."""
    with np.load(bundle / case["input"], allow_pickle=False) as arrays:
        coords = arrays["coords"]
        kmap = StoredKernelMap(arrays["out_coords"], arrays["in_idx"], arrays["out_idx"], arrays["indptr"],
                               int(coords.shape[0]))
        kernel_size, stride, dilation, submanifold = (int(v) for v in arrays["geometry"])
        spatial_shape = arrays["spatial_shape"]
    X, W = layer_operands(kmap.num_inputs, len(kmap.indptr) - 1, case["c_in"], case["c_out"], case["stride"],
                          case["level"], seed)
    return ConvLayer(parse_layer(case["layer"]), coords, X, W, kernel_size, stride, dilation, bool(submanifold),
                     spatial_shape, kmap)


def candidate_factory(library: Path, layer: ConvLayer, device: str, dtype: str = "float32"):
    """``factory() -> run``: load the kernel, put the features and weights on the device (in ``dtype``)."""
    import torch  # noqa: PLC0415 - the GPU host has torch; the runner imports it after the thread settings

    def factory():
        kernel = load(library)
        X, W = (torch.from_numpy(a).to(device=device, dtype=getattr(torch, dtype)) for a in (layer.X, layer.W))
        return lambda: kernel(X, W)

    return factory


def _in_map_order(device: str):
    """``wrap(run)``: spconv's outputs put in the kernel map's row order (``run.rows``) inside the timed call,
    an index per output row."""
    import torch  # noqa: PLC0415 - the GPU host has torch; the runner imports it after the thread settings

    def wrap(run):
        if run.rows is None:
            return run
        order = torch.from_numpy(np.asarray(run.rows, dtype=np.int64)).to(device)
        return lambda: run().index_select(0, order)

    return wrap


def run_conv_case(bundle: Path, section: dict, case: dict, scratch: Path, assemble: Callable, *, device: str,
                  bandwidth: dict, timing, where: dict) -> list[dict]:
    """Check and time one layer's candidates and baselines; one validated record per contender."""
    layer = load_layer(bundle, case, section["seed"])
    kmap = layer.kmap
    bench_case = conv_reference(kmap, layer.X, layer.W)
    rows, candidates = [], {}
    for candidate in case["candidates"]:
        name = candidate_label(candidate["config"], "format")
        candidates[name] = candidate
        library = assemble(bundle, candidate, scratch)
        dtype = candidate_dtype(candidate["config"])
        check = bench_case if dtype == "float32" else half_precision_case(
            conv_reference(kmap, rounded_to(layer.X, dtype), rounded_to(layer.W, dtype)), dtype)
        rows.append(prepare(Row(name, "compile"), candidate_factory(library, layer, device, dtype), check))
    rows += [baseline_row(entry, bench_case, device, inputs=(layer,), wrap=_in_map_order(device))
             for entry in declared.variants(_OP, section["baselines"]).values()]
    time_rows(_OP, rows, bench_case, bandwidth["bytes_per_s"], timing, device)
    timed = [row for row in rows if row.stats is not None and row.contender not in candidates]
    best = min(timed, key=lambda row: row.stats.median) if timed else None
    records = []
    for row in rows:
        status, reason = status_of(row)
        candidate = candidates.get(row.contender)
        record = make_record(
            experiment=_OP, op=_OP, device=device, dataset=case["cloud"], feat=case["c_in"], contender=row.contender,
            status=status, reason=reason, stats=row.stats.to_dict() if row.stats else None,
            shape=(kmap.num_outputs, kmap.num_inputs), nnz=kmap.num_pairs,
            variant=candidate_variant(candidate["config"], "format") if candidate else None,
            times=row_times(row, candidate),
            min_bytes=bench_case.min_bytes, flops=conv_flops(kmap.num_pairs, (case["c_in"], case["c_out"])),
            copy_bytes_per_s=bandwidth["bytes_per_s"], provenance=where)
        record["case"] = f"{case['cloud']} {case['voxel_size']:g} m {case['layer']}"
        record["conv"] = {
            "case": "layer", "layer": case["layer"], "voxel_size": case["voxel_size"],
            "kind": "sparsetir" if candidate else "baseline", "kernel_size": layer.kernel_size,
            "dilation": layer.dilation, "c_in": case["c_in"], "c_out": case["c_out"], "stride": case["stride"],
            "level": case["level"], "inputs": kmap.num_inputs, "outputs": kmap.num_outputs, "pairs": kmap.num_pairs,
            "best_baseline": best.contender if best else None,
            "speedup_vs_best": best.stats.median / row.stats.median if best and row.stats else None,
            "map_s": case.get("map_s") if candidate else None, "map_stats": None,
            "map_library": "sparsetir" if candidate else None, "wrong_rows": None,
        }
        note_candidate(record["conv"], candidate)
        records.append(record)
    return records


def run_conv_cases(bundle: Path, manifest: dict, out: Path, scratch: Path, assemble: Callable, *, bandwidth: dict,
                   timing, where: dict, deadline_s: float, say: Callable[[str], None]) -> list[str]:
    """Every convolution case of the bundle that fits before ``deadline_s`` (``time.monotonic()``); the record
    files, one per (cloud, voxel size)."""
    section, device = manifest["conv"], manifest["device"]

    def failed(case: dict, reason: str) -> list[dict]:
        return [make_record(experiment=_OP, op=_OP, device=device, dataset=case["cloud"], feat=case["c_in"],
                            contender=ALL_CONTENDERS, status="failed", reason=reason, provenance=where)]

    return run_cases_in_turn(
        section["cases"], lambda case: run_conv_case(bundle, section, case, scratch, assemble, device=device,
                                                     bandwidth=bandwidth, timing=timing, where=where),
        out, family="conv",
        file_of=lambda case: f"records/conv/{dataset_slug(case['cloud'])}-v{case['voxel_size']:g}.json",
        label_of=lambda case: f"{case['cloud']} {case['layer']}", failed=failed, deadline_s=deadline_s, say=say)


def _build(staging: Path, settings: dict, **stores) -> dict:
    return build_conv_section(staging, settings["clouds"], voxel_size=settings.get("voxel_size", 0.2),
                              layers=settings.get("layers", DEFAULT_CONV_LAYERS),
                              limit=settings.get("limit", len(DEFAULT_CONV_CONFIGS)),
                              baselines=settings.get("baselines"), **stores)


def _add_arguments(parser) -> None:
    parser.add_argument("--conv-cloud", action="append", default=[], metavar="CLOUD",
                        help="also sparse-convolution candidates on this point cloud, e.g. kitti-000000 (repeatable)")
    parser.add_argument("--conv-voxel-size", type=float, default=0.2, help="the clouds' voxel size (default 0.2 m)")


PART = BundlePart("conv", "the convolution candidates", _build, run_conv_cases, order=2,
                  add_arguments=_add_arguments,
                  from_arguments=lambda args: {"clouds": args.conv_cloud, "voxel_size": args.conv_voxel_size}
                  if args.conv_cloud else None)
