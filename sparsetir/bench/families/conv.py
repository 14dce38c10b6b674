"""Sparse convolution: sparsetir's ``sparse_conv3d`` against spconv and plain torch (a :class:`Family` declaration).

    python -m sparsetir.bench conv                                   # KITTI scan 000000 at 0.2 m
    python -m sparsetir.bench conv --cloud kitti-000001 --voxel-size 0.1 --format default --format auto
    python -m sparsetir.bench conv --cloud lidar:20000 --layer 32:64:2@0 --no-network   # a seeded synthetic scan

A point cloud (a KITTI scan from the registry, or ``lidar:<points>``: a seeded synthetic scan of a
ground plane, walls and poles, ``sparsetir.data.lidar_scan``) is voxelised once (``ops.voxelize``;
mean features); level ``L`` is level 0 after ``L`` stride-2 kernel maps, as the layers of a
MinkUNet/SparseResNet see it.

*Per layer* (``c_in:c_out:stride@level``, kernel 3 by default): the kernel map is built once by
sparsetir (``ops.kernel_map``) and once by spconv (its rules), both timed interleaved: the
``map_s`` fields, set-up rather than kernel time. Seeded features and weights are shared by
every contender:

- ``sparsetir`` (``format=None``: csf, output-stationary), ``sparsetir-auto`` (``format="auto"``:
  the tuner's pick for this layer, tuned first or read from the database) and
  ``sparsetir[<format>]`` (an explicit relational format, e.g. relcsr: gather-GEMM-scatter);
- every variant the baseline libraries declare for ``conv``: spconv 2.3.8 with all threads and with
  one (its CPU scatter was seen to write wrong rows with several threads), a plain torch
  gather-``mm``-``index_add_``, and TorchSparse and MinkowskiEngine as unavailable rows.

The engine (``bench.family``) checks each contender against the float64 reference
(``reference.conv``) before anything is timed: a wrong one gets a ``wrong`` record saying how many
output rows differ and is not timed. The correct ones are timed together, interleaved with a cache
flush before every call. The speedup of a contender is over the fastest baseline of the case.

*End to end*: a network of layers (``c_in:c_out:stride``, ReLU between them) on level 0, every
map built first (a subm map once per level, as spconv's ``indice_key`` caches them), then one
call runs every layer; spconv builds and orders its own rules and outputs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...data import point_clouds
from ...data.lidar_scan import LIDAR_PREFIX, check_cloud_name, load_points
from ...reference import Case, rounding_tolerance
from ...reference.conv import conv_flops, conv_reference, layer_operands, offset_pairs, scatter_products
from ...runtime.loader import usable_cores
from ...timing import DEFAULT, TimingPolicy, time_interleaved
from ..bounds import measure_peak_rates
from ..case_runner import unavailable_records
from ..family import SPARSETIR, Contender, Family, register
from ..records import provenance

__all__ = ["DEFAULT_LAYERS", "DEFAULT_NETWORK", "FAMILY", "ConvLayer", "ConvNetwork", "LayerSpec", "Scan",
           "benchmark_scan", "parse_layer"]

#: MinkUNet/SparseResNet layer shapes as TorchSparse's benchmarks use, each at the level it runs on
DEFAULT_LAYERS = ("4:32:1@0", "32:32:1@0", "32:64:2@0", "64:64:1@1", "64:128:2@1", "128:128:1@2", "128:256:2@2")
#: a 10-layer SparseResNet-style encoder (ReLU between the layers)
DEFAULT_NETWORK = ("4:32:1", "32:32:1", "32:64:2", "64:64:1", "64:64:1", "64:128:2", "128:128:1", "128:128:1",
                   "128:256:2", "256:256:1")
MAP_SAMPLES = 7
NETWORK = "network"  # the second input form: a chain of layers
_LAYER = re.compile(r"(\d+):(\d+):(\d+)(?:@(\d+))?")


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class LayerSpec:
    """One convolution: channels, stride and the resolution level it runs on (``c_in:c_out:stride@level``)."""

    c_in: int
    c_out: int
    stride: int
    level: int = 0

    def __str__(self) -> str:
        return f"{self.c_in}:{self.c_out}:{self.stride}@{self.level}"


def parse_layer(text: str, *, network: bool = False) -> LayerSpec:
    """``c_in:c_out:stride@level`` (a network layer has no level: it follows from the strides before it)."""
    match = _LAYER.fullmatch(str(text).strip())
    if not match or (network and match.group(4) is not None):
        form = "c_in:c_out:stride" if network else "c_in:c_out:stride@level"
        raise ValueError(f"bad conv layer {text!r}; expected {form}, e.g. 32:64:2" + ("" if network else "@0"))
    c_in, c_out, stride = (int(match.group(i)) for i in (1, 2, 3))
    level = int(match.group(4) or 0)
    if min(c_in, c_out, stride) < 1 or c_in > 4096 or c_out > 4096 or level > 16:
        raise ValueError(f"conv layer {text!r}: channels must lie in 1..4096, stride >= 1, level <= 16")
    return LayerSpec(c_in, c_out, stride, level)


@dataclass
class Scan:
    """A voxelised cloud: coordinates per resolution level and the kernel maps built so far (each once)."""

    name: str
    voxel_size: float
    kernel_size: int = 3
    dilation: int = 1
    levels: list = field(default_factory=list)  # level -> (N, 4) coordinates
    features: np.ndarray | None = None  # level 0's mean point features
    voxelize_s: float = 0.0
    _maps: dict = field(default_factory=dict)

    @classmethod
    def load(cls, name: str, voxel_size: float, *, kernel_size: int = 3, dilation: int = 1, seed: int = 0) -> Scan:
        from ...ops import voxelize  # noqa: PLC0415 - the compiler loads after the thread settings

        points = load_points(name, seed)
        started = time.perf_counter()
        coords, features = voxelize(points, voxel_size)
        scan = cls(name, float(voxel_size), kernel_size, dilation, [coords], features)
        scan.voxelize_s = time.perf_counter() - started
        return scan

    def coords(self, level: int) -> np.ndarray:
        while len(self.levels) <= level:
            self.levels.append(self.kernel_map(len(self.levels) - 1, 2).out_coords)
        return self.levels[level]

    def kernel_map(self, level: int, stride: int):
        """Our kernel map of a stride-``stride`` layer on ``level`` (built once)."""
        from ...ops import kernel_map  # noqa: PLC0415

        key = (level, stride)
        if key not in self._maps:
            self._maps[key] = kernel_map(self.coords(level), kernel_size=self.kernel_size, stride=stride,
                                         dilation=self.dilation, spatial_shape=self.spatial_shape(level))
        return self._maps[key]

    def spatial_shape(self, level: int) -> np.ndarray:
        """Level 0's grid is its coordinates' extent; each stride-2 map derives the next one's."""
        if level == 0:
            return self.levels[0][:, 1:].max(axis=0) + 1 if len(self.levels[0]) else np.ones(3, np.int64)
        return self.kernel_map(level - 1, 2).out_spatial_shape


@dataclass
class ConvLayer:
    """One layer's inputs, as every contender reads them (the baselines' conv variants)."""

    spec: LayerSpec
    coords: np.ndarray
    X: np.ndarray
    W: np.ndarray
    kernel_size: int
    stride: int
    dilation: int
    submanifold: bool
    spatial_shape: np.ndarray
    kmap: object


def layer_inputs(scan: Scan, spec: LayerSpec, seed: int = 0) -> ConvLayer:
    """Seeded standard-normal features and weights (scaled by ``1/sqrt(27 c_in)``) for ``spec`` on ``scan``."""
    kmap = scan.kernel_map(spec.level, spec.stride)
    coords = scan.coords(spec.level)
    X, W = layer_operands(len(coords), kmap.num_offsets, spec.c_in, spec.c_out, spec.stride, spec.level, seed)
    return ConvLayer(spec, coords, X, W, scan.kernel_size, spec.stride, scan.dilation, kmap.submanifold,
                     scan.spatial_shape(spec.level), kmap)


@dataclass
class ConvNetwork:
    """A chain of layers from level 0 (ReLU between them), as the network contenders read it."""

    specs: list
    coords: np.ndarray
    X: np.ndarray
    layers: list  # ConvLayer per layer (X unused past the first)


def network_inputs(scan: Scan, specs: Sequence[LayerSpec], seed: int = 0) -> ConvNetwork:
    level, layers = 0, []
    for index, spec in enumerate(specs):
        placed = LayerSpec(spec.c_in, spec.c_out, spec.stride, level)
        layer = layer_inputs(scan, placed, seed + 1000 * (index + 1))
        layers.append(layer)
        if spec.stride > 1:
            if spec.stride != 2:
                raise ValueError(f"network layer {spec}: only strides 1 and 2 (the levels halve)")
            level += 1
    for before, after in zip(layers, layers[1:]):
        if before.spec.c_out != after.spec.c_in:
            raise ValueError(f"network layers {before.spec} then {after.spec}: channels do not chain")
    return ConvNetwork(list(specs), scan.coords(0), layers[0].X, layers)


def network_map_seconds(scan: Scan, specs: Sequence[LayerSpec]) -> float:
    """Seconds sparsetir takes to build every kernel map the network needs from level 0, afresh: one
    submanifold map per level (shared by its layers, as spconv's ``indice_key``) and each strided one."""
    from ...ops import kernel_map  # noqa: PLC0415

    coords, shape, built, seconds = scan.coords(0), scan.spatial_shape(0), set(), 0.0
    for spec in specs:
        if spec.stride == 1 and "subm" in built:
            continue
        started = time.perf_counter()
        kmap = kernel_map(coords, kernel_size=scan.kernel_size, stride=spec.stride, dilation=scan.dilation,
                          spatial_shape=shape)
        seconds += time.perf_counter() - started
        if spec.stride == 1:
            built.add("subm")
        else:
            coords, shape, built = kmap.out_coords, kmap.out_spatial_shape, set()
    return seconds


def network_reference(network: ConvNetwork) -> Case:
    """The float64 chain (ReLU between layers) and an entry-wise tolerance: each layer's float32 rounding
    plus the previous layers' tolerance carried through ``|W|``."""
    X = np.asarray(network.X, dtype=np.float64)
    magnitude, tolerance = np.abs(X), np.zeros_like(X)
    for index, layer in enumerate(network.layers):
        groups, M = offset_pairs(layer.kmap)
        W64 = np.asarray(layer.W, dtype=np.float64)
        Y = scatter_products(groups, M, X, W64)
        magnitude = scatter_products(groups, M, magnitude, np.abs(W64))
        fan_in = np.zeros(M)
        for _, _, target in groups:
            np.add.at(fan_in, target, 1.0)
        tolerance = scatter_products(groups, M, tolerance, np.abs(W64)) + rounding_tolerance(
            magnitude, fan_in[:, None] * W64.shape[1] + 1.0)
        X = np.maximum(Y, 0.0) if index + 1 < len(network.layers) else Y
    return Case((network.X,), X, tolerance, 0)


# ---------------------------------------------------------------- the family


def _variant(kernel) -> str:
    return f"{kernel.spec['format']} dataflow={kernel.spec['dataflow']} {kernel.spec.get('feature_loops', 'kl')}"


class Conv(Family):
    """Sparse 3-D convolution (see the module docstring)."""

    name = op = "conv"
    title = "sparse 3D convolution"
    description = "sparse convolution (KITTI point clouds) vs TorchSparse"
    form_keys = {NETWORK: "conv-network"}
    default_tune_budget_s = 10.0
    setup_is_conversion = False
    config_op = "conv"

    workflow = "cases"
    figures = {"figure": "conv_speedup.png"}

    def workflow_cases(self, settings) -> dict[str, dict]:
        """One job per (cloud, voxel size): ``kitti-000000-v0.2``, ``lidar_3000-v0.1``."""
        from ...data import dataset_slug  # noqa: PLC0415

        return {f"{dataset_slug(cloud)}-v{float(size):g}": {"cloud": cloud, "voxel_size": float(size)}
                for cloud in settings["clouds"] for size in settings["voxel_sizes"]}

    def data_needs(self, section) -> list:
        return self.registry_needs(section.get("clouds", []))

    def check_config(self, section) -> None:
        """Known clouds, layer strings that parse, a network whose layers chain (strides 1 or 2)."""
        from ...data.lidar_scan import check_cloud_name  # noqa: PLC0415 - only when a config is checked

        self.check_names("clouds", section["clouds"], check_cloud_name)
        for key, network in (("layers", False), ("network", True)):
            self.check_names(key, section.get(key) or (), lambda text, network=network: parse_layer(text, network=network))
        chained = None
        for text in section.get("network") or ():
            spec = parse_layer(text, network=True)
            if chained is not None and spec.c_in != chained:
                raise ValueError(f"config conv.network: layer {text} takes {spec.c_in} channels after a layer giving "
                                 f"{chained}")
            if spec.stride not in (1, 2):
                raise ValueError(f"config conv.network: layer {text}: the network's strides are 1 or 2")
            chained = spec.c_out

    def workflow_case(self, case, settings, *, timing, device, seed, threads, say) -> list[dict]:
        """One voxelised cloud (``case``: ``cloud``, ``voxel_size``): every layer, then the network
        (``network_timing``, on top of ``timing``, its policy)."""
        from ...timing import TimingPolicy  # noqa: PLC0415

        network_timing = TimingPolicy.from_mapping(settings["network_timing"], base=timing) \
            if settings.get("network_timing") else timing
        contenders = self.contenders(settings["sparsetir"], settings["baselines"],
                                     tune_budget_s=settings.get("tune_budget_s"))
        records = benchmark_scan(case["cloud"], float(case["voxel_size"]), contenders,
                                 layers=settings.get("layers") or (), network=settings.get("network") or (),
                                 kernel_size=settings.get("kernel_size", 3), dilation=settings.get("dilation", 1),
                                 timing=timing, network_timing=network_timing, seed=seed, threads=threads,
                                 progress=say)
        say(self.format_records(records))
        return records

    def reference(self, inputs) -> Case:
        if isinstance(inputs, ConvNetwork):
            return network_reference(inputs)
        return conv_reference(inputs.kmap, inputs.X, inputs.W)

    def _kernel(self, layer: ConvLayer, fmt, tune_budget_s):
        from ...ops import compile_sparse_conv3d  # noqa: PLC0415 - the compiler loads after the thread settings

        if fmt == "auto":
            import os  # noqa: PLC0415

            import sparsetir.tune  # noqa: F401, PLC0415 - registers the answer to format="auto"

            budget = self.default_tune_budget_s if tune_budget_s is None else tune_budget_s
            os.environ["SPARSETIR_TUNE_BUDGET_S"] = str(budget)
        return compile_sparse_conv3d(layer.kmap, int(layer.W.shape[1]), int(layer.W.shape[2]), format=fmt)

    def sparsetir_factory(self, inputs, *, format=None, tune_budget_s=None, form=None):
        """``run()`` of sparsetir's kernel for a layer (or, ``form="network"``, one kernel per layer with ReLU
        in place between them), compiled (and tuned for ``"auto"``) now, into preallocated outputs;
        ``run.timings``: conversion, compile and tuning seconds."""
        import torch  # noqa: PLC0415

        layers = inputs.layers if form == NETWORK else [inputs]
        kernels = [self._kernel(layer, format, tune_budget_s) for layer in layers]
        weights = [torch.from_numpy(layer.W) for layer in layers]
        buffers = [torch.empty(layer.kmap.num_outputs, layer.W.shape[2]) for layer in layers]
        X = torch.from_numpy(inputs.X)

        def run():
            h = X
            for index, (kernel, W, out) in enumerate(zip(kernels, weights, buffers)):
                h = kernel(h, W, out=out)
                if index + 1 < len(kernels):
                    torch.relu_(h)
            return h

        if form == NETWORK:
            run.timings = {key: sum(k.timings.get(key) or 0.0 for k in kernels) for key in ("convert_s", "compile_s")}
            run.timings["tune_s"] = sum(k.timings.get("tune_s") or 0.0 for k in kernels) if format == "auto" else None
        else:
            run.timings = {key: kernels[0].timings.get(key) for key in ("convert_s", "compile_s", "tune_s")}
        run.variant, run.rows = "; ".join(dict.fromkeys(_variant(k) for k in kernels)), None
        return run

    def mismatch(self, got, case: Case, run) -> tuple[str | None, dict]:
        """A wrong result says how many output rows differ (in the reference's row order: ``run.rows``)."""
        rows = getattr(run, "rows", None)
        if rows is not None:
            got = got[rows]
        if got.shape != case.reference.shape:
            return f"wrong result: shape {got.shape}, expected {case.reference.shape}", {}
        bad = ~(np.abs(got - case.reference) <= case.tolerance)
        if not bad.any():
            return None, {}
        first = int(np.flatnonzero(bad.any(axis=1))[0])
        wrong_rows = int(bad.any(axis=1).sum())
        return (f"wrong result: {wrong_rows} of {got.shape[0]} output rows differ (first: row {first}, "
                f"largest error {np.nanmax(np.abs(got - case.reference)):.3g})"), {"wrong_rows": wrong_rows}

    def reference_names(self, rows, contenders) -> Sequence[str]:
        """Every baseline: a speedup is over the fastest of the case."""
        return [name for name, contender in contenders.items() if contender.kind != SPARSETIR]

    def record_fields(self, row, contender, *, scan, label, kind, extra, maps, best, **_) -> dict:
        run = row.extra.get("run")
        library = "spconv" if contender.name.startswith("spconv") else "sparsetir"
        map_stats = (maps or {}).get(library)
        map_s = row.extra.get("map_s", getattr(run, "map_s", None))
        return {"case": f"{scan.name} {scan.voxel_size:g} m {label}",  # one case per layer (the report's key)
                "conv": {"case": kind, "layer": label, "voxel_size": scan.voxel_size, "kind": contender.kind,
                         "kernel_size": scan.kernel_size, "dilation": scan.dilation, **extra,
                         "best_baseline": best, "speedup_vs_best": row.speedup_vs_best,
                         "map_s": map_stats["median"] if map_stats else map_s, "map_stats": map_stats,
                         "map_library": library if map_stats else None, "wrong_rows": row.extra.get("wrong_rows")}}

    # ------------------------------------------------------------ the command line

    def note(self, record: dict) -> str | None:
        conv = record.get("conv") or {}
        map_s = conv.get("map_s")
        return " ".join(part for part in (f"map {map_s * 1e3:.1f} ms" if map_s else None, record.get("reason")) if part)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cloud", action="append",
                            help=f"point cloud: {', '.join(point_clouds())}, or {LIDAR_PREFIX}<points> (repeatable; "
                                 "default kitti-000000)")
        parser.add_argument("--voxel-size", type=float, action="append", help="voxel edge in metres (repeatable; 0.2)")
        parser.add_argument("--layer", action="append", dest="layers", metavar="C_IN:C_OUT:STRIDE@LEVEL",
                            help=f"a per-layer case (repeatable; default {' '.join(DEFAULT_LAYERS)})")
        parser.add_argument("--network", nargs="*", metavar="C_IN:C_OUT:STRIDE",
                            help=f"the end-to-end network's layers (default {' '.join(DEFAULT_NETWORK)})")
        parser.add_argument("--no-network", action="store_true", help="skip the end-to-end network")
        parser.add_argument("--kernel-size", type=int, default=3, help="kernel size of every layer (default 3)")
        parser.add_argument("--dilation", type=int, default=1, help="dilation of every layer (default 1)")

    def check_arguments(self, args) -> None:
        args.cloud = args.cloud or ["kitti-000000"]
        args.voxel_size = args.voxel_size or [0.2]
        args.layers = args.layers if args.layers is not None else list(DEFAULT_LAYERS)
        args.network = [] if args.no_network else (args.network if args.network is not None else list(DEFAULT_NETWORK))
        for name in args.cloud:
            check_cloud_name(name)
        for text in args.layers:
            parse_layer(text)
        for text in args.network:
            parse_layer(text, network=True)
        if any(v <= 0 for v in args.voxel_size):
            raise ValueError("voxel sizes must be positive")

    def cli_timing(self, args) -> TimingPolicy:
        return DEFAULT.replace(flush=not args.no_flush, samples=args.samples, max_time_s=args.max_time_s,
                               seed=args.seed, min_warmup=3, warmup_s=0.0, min_samples=min(5, args.samples))

    def cli_cases(self, args, timing, contenders, say):
        for cloud in args.cloud:
            for voxel_size in args.voxel_size:
                yield f"{cloud} at {voxel_size} m", lambda cloud=cloud, voxel_size=voxel_size: benchmark_scan(
                    cloud, voxel_size, contenders, layers=args.layers, network=args.network,
                    kernel_size=args.kernel_size, dilation=args.dilation, timing=timing, seed=args.seed,
                    threads=args.threads, progress=say)


FAMILY = register(Conv())


def time_maps(layer: ConvLayer, spconv_build: Callable | None, timing: TimingPolicy) -> dict:
    """Median seconds of building the layer's kernel map: sparsetir's ``kernel_map`` and spconv's rules,
    interleaved (``{"sparsetir": ..., "spconv": ...}``; spconv absent when it cannot run)."""
    from ...ops import kernel_map  # noqa: PLC0415

    def ours():
        return kernel_map(layer.coords, kernel_size=layer.kernel_size, stride=layer.stride, dilation=layer.dilation,
                          spatial_shape=layer.spatial_shape)

    builders = {"sparsetir": ours, **({"spconv": spconv_build} if spconv_build else {})}
    stats = time_interleaved(builders, timing.replace(samples=MAP_SAMPLES, min_samples=min(3, MAP_SAMPLES),
                                                      warmup_s=0.0, min_warmup=1))
    return {name: stat.to_dict() for name, stat in stats.items()}


def _where(timing: TimingPolicy, threads: int | None) -> dict:
    return provenance(flush=timing.flush, extra={"timing": timing.to_dict(), "threads": threads or usable_cores()})


def _summary(kind: str, rows) -> str:
    return ", ".join(f"{row.contender} " + (f"{row.stats.median * 1e3:.2f} ms" if row.stats else
                                           (row.error or "failed").split(":")[0]) for row in rows)


def benchmark_layer(scan: Scan, spec: LayerSpec, contenders: Sequence[Contender], *, timing: TimingPolicy,
                    seed: int = 0, threads: int | None = None, say=print) -> list[dict]:
    """Every contender on one layer (see the module docstring): one record each."""
    layer = layer_inputs(scan, spec, seed)
    kmap = layer.kmap
    case = FAMILY.reference(layer)
    rows = FAMILY.check(contenders, layer, case)
    spconv_build = next((getattr(row.extra.get("run"), "build_map", None) for row in rows
                         if getattr(row.extra.get("run"), "build_map", None) is not None), None)
    maps = time_maps(layer, spconv_build, timing)
    best, _ = FAMILY.time(rows, timing, contenders)
    say(f"  layer {spec}: {kmap.num_inputs:,} -> {kmap.num_outputs:,} voxels, {kmap.num_pairs:,} pairs; map "
        + ", ".join(f"{k} {v['median'] * 1e3:.1f} ms" for k, v in maps.items()) + "; " + _summary("layer", rows))
    extra = {"c_in": spec.c_in, "c_out": spec.c_out, "stride": spec.stride, "level": spec.level,
             "inputs": kmap.num_inputs, "outputs": kmap.num_outputs, "pairs": kmap.num_pairs}
    where = _where(timing, threads)
    by_name = {c.name: c for c in contenders}
    return [FAMILY.record(row, by_name[row.contender], dataset=scan.name, feat=spec.c_in, provenance=where,
                          shape=(kmap.num_outputs, kmap.num_inputs), nnz=kmap.num_pairs,
                          flops=conv_flops(kmap.num_pairs, (spec.c_in, spec.c_out)), min_bytes=case.min_bytes,
                          scan=scan, label=str(spec), kind="layer", extra=extra, maps=maps, best=best) for row in rows]


def benchmark_network(scan: Scan, specs: Sequence[LayerSpec], contenders: Sequence[Contender], *,
                      timing: TimingPolicy, seed: int = 0, threads: int | None = None, say=print) -> list[dict]:
    """Every contender on the whole network: one record each (``case: "network"``)."""
    network = network_inputs(scan, specs, seed)
    ours_map_s = network_map_seconds(scan, specs)
    case = FAMILY.reference(network)
    rows = FAMILY.check(contenders, network, case, form=NETWORK)
    best, _ = FAMILY.time(rows, timing, contenders)
    pairs = sum(layer.kmap.num_pairs for layer in network.layers)
    flops = sum(conv_flops(layer.kmap.num_pairs, (layer.spec.c_in, layer.spec.c_out)) for layer in network.layers)
    say(f"  network {len(specs)} layers, {pairs:,} pairs: " + _summary("network", rows))
    by_name = {c.name: c for c in contenders}
    for row in rows:
        if by_name[row.contender].kind == SPARSETIR or row.contender == "torch-gather-mm":
            row.extra["map_s"] = ours_map_s
    label = f"network ({len(specs)} layers)"
    extra = {"c_in": specs[0].c_in, "c_out": specs[-1].c_out, "layers": len(specs),
             "network": [f"{s.c_in}:{s.c_out}:{s.stride}" for s in specs],
             "inputs": len(network.coords), "outputs": network.layers[-1].kmap.num_outputs, "pairs": pairs}
    where = _where(timing, threads)
    return [FAMILY.record(row, by_name[row.contender], dataset=scan.name, feat=specs[0].c_in, provenance=where,
                          shape=(network.layers[-1].kmap.num_outputs, len(network.coords)), nnz=pairs, flops=flops,
                          min_bytes=0, scan=scan, label=label, kind="network", extra=extra, maps=None, best=best)
            for row in rows]


def benchmark_scan(cloud: str, voxel_size: float, contenders: Sequence[Contender], *,
                   layers: Sequence[str] = DEFAULT_LAYERS, network: Sequence[str] | None = DEFAULT_NETWORK,
                   kernel_size: int = 3, dilation: int = 1, timing: TimingPolicy = DEFAULT,
                   network_timing: TimingPolicy | None = None, seed: int = 0, threads: int | None = None,
                   progress: Callable[[str], None] | None = None, rates: dict | None = None) -> list[dict]:
    """Every layer, then the network, on one voxelised cloud; one ``"*"`` record per layer when the cloud
    cannot be loaded. Every record carries the machine's measured FMA rate and copy bandwidth (``rates``,
    ``bounds.measure_peak_rates``; measured here when not given), so its tables show % of each."""
    say = progress or (lambda message: None)
    specs = [parse_layer(text) for text in layers]
    chain = [parse_layer(text, network=True) for text in network or ()]
    try:
        scan = Scan.load(cloud, voxel_size, kernel_size=kernel_size, dilation=dilation, seed=seed)
    except (OSError, ValueError, KeyError) as error:
        say(f"{cloud}: unavailable: {type(error).__name__}: {error}")
        return unavailable_records(experiment=FAMILY.name, op=FAMILY.op, dataset=cloud,
                                   feats=sorted({s.c_in for s in specs}) or [1],
                                   reason=f"{type(error).__name__}: {error}")
    say(f"{cloud} at {voxel_size} m: {len(scan.levels[0]):,} voxels (voxelised in {scan.voxelize_s * 1e3:.0f} ms)")
    records = []
    for spec in specs:
        records += benchmark_layer(scan, spec, contenders, timing=timing, seed=seed, threads=threads, say=say)
    if chain:
        records += benchmark_network(scan, chain, contenders, timing=network_timing or timing, seed=seed,
                                     threads=threads, say=say)
    rates = rates or measure_peak_rates(timing, threads=threads)
    say(f"machine: FMA {rates['fma_flops'] / 1e9:.0f} Gflop/s, copy {rates['copy_bytes_per_s'] / 1e9:.1f} GB/s "
        f"({rates['threads']} threads)")
    for record in records:
        record["conv"]["voxelize_s"] = scan.voxelize_s
        record["rates"] = rates
    return records
