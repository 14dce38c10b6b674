"""The sparse-convolution benchmark: sparsetir's ``sparse_conv3d`` against spconv and plain torch.

    python -m sparsetir.bench.conv                                   # KITTI scan 000000 at 0.2 m
    python -m sparsetir.bench.conv --cloud kitti-000001 --voxel-size 0.1 --format default --format auto
    python -m sparsetir.bench.conv --cloud lidar:20000 --layer 32:64:2@0 --no-network   # a seeded synthetic scan

A point cloud (a KITTI scan from the registry, or ``lidar:<points>``: a seeded synthetic scan of a
ground plane, walls and poles) is voxelised once (``ops.voxelize``; mean features); level ``L``
is level 0 after ``L`` stride-2 kernel maps, as the layers of a MinkUNet/SparseResNet see it.

*Per layer* (``c_in:c_out:stride@level``, kernel 3 by default): the kernel map is built once by
sparsetir (``ops.kernel_map``) and once by spconv (its rules), both timed interleaved: the
``map_s`` fields, set-up rather than kernel time. Seeded features and weights are shared by
every contender:

- ``sparsetir`` (``format=None``: csf, output-stationary), ``sparsetir-auto`` (``format="auto"``:
  the tuner's pick for this layer, tuned first or read from the database) and
  ``sparsetir[<format>]`` (an explicit relational format, e.g. relcsr: gather-GEMM-scatter);
- every variant of :mod:`baselines.conv`: spconv 2.3.8 with all threads and with one (its CPU
  scatter was seen to write wrong rows with several threads), a plain torch
  gather-``mm``-``index_add_``, and TorchSparse and MinkowskiEngine as unavailable rows.

Each contender is checked against the float64 reference (``reference.conv``) before anything is
timed: a wrong one gets a ``wrong`` record saying how many output rows differ and is not timed.
The correct ones are timed together, interleaved with a cache flush before every call
(``sparsetir.timing.time_interleaved``).

*End to end*: a network of layers (``c_in:c_out:stride``, ReLU between them) on level 0, every
map built first (a subm map once per level, as spconv's ``indice_key`` caches them), then one
call runs every layer; spconv builds and orders its own rules and outputs.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

import baselines as declared

from ..data import load, point_clouds
from ..reference import Case, host_array, rounding_tolerance
from ..reference.conv import conv_flops, conv_reference, layer_operands, offset_pairs, scatter_products
from ..runtime.loader import usable_cores
from ..timing import DEFAULT, TimingPolicy, default_flush_bytes, time_interleaved
from .bounds import measure_peak_rates, rate_percentages
from .case_runner import short_reason, unavailable_records
from .records import make_record, provenance, write_json_atomic
from .threads import configure_threads

__all__ = ["DEFAULT_LAYERS", "DEFAULT_NETWORK", "EXPERIMENT", "SPARSETIR", "ConvLayer",
           "ConvNetwork", "LayerSpec", "Scan", "benchmark_scan", "check_cloud_name", "contender_name", "main",
           "parse_layer", "synthetic_scan"]

EXPERIMENT = "conv"
SPARSETIR = "sparsetir"
SYNTHETIC_PREFIX = "lidar:"
MAX_SYNTHETIC_POINTS = 5_000_000
#: MinkUNet/SparseResNet layer shapes as TorchSparse's benchmarks use, each at the level it runs on
DEFAULT_LAYERS = ("4:32:1@0", "32:32:1@0", "32:64:2@0", "64:64:1@1", "64:128:2@1", "128:128:1@2", "128:256:2@2")
#: a 10-layer SparseResNet-style encoder (ReLU between the layers)
DEFAULT_NETWORK = ("4:32:1", "32:32:1", "32:64:2", "64:64:1", "64:64:1", "64:128:2", "128:128:1", "128:128:1",
                   "128:256:2", "256:256:1")
DEFAULT_TUNE_BUDGET_S = 10.0
MAP_SAMPLES = 7
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


def check_cloud_name(name: str) -> None:
    """``ValueError`` unless ``name`` is a registered point cloud or a valid ``lidar:<points>`` spec."""
    if name.startswith(SYNTHETIC_PREFIX):
        points = name[len(SYNTHETIC_PREFIX):]
        if not points.isdigit() or not 1 <= int(points) <= MAX_SYNTHETIC_POINTS:
            raise ValueError(f"bad synthetic cloud {name!r}; expected {SYNTHETIC_PREFIX}<points> with 1 .. "
                             f"{MAX_SYNTHETIC_POINTS:,} points")
        return
    if name not in point_clouds():
        raise ValueError(f"unknown point cloud {name!r}; known: {', '.join(point_clouds())}, or "
                         f"{SYNTHETIC_PREFIX}<points>")


def synthetic_scan(points: int, seed: int = 0) -> np.ndarray:
    """A seeded ``(points, 4)`` float32 scan: a ground disc (denser near the sensor), walls and poles, with
    a reflectance column, about the shape of a LiDAR sweep."""
    rng = np.random.default_rng(seed)
    n_ground, n_wall = int(points * 0.6), int(points * 0.3)
    n_pole = points - n_ground - n_wall
    r, t = 40.0 * rng.random(n_ground) ** 2, rng.uniform(0, 2 * np.pi, n_ground)
    ground = np.c_[r * np.cos(t), r * np.sin(t), rng.normal(-1.7, 0.03, n_ground)]
    side = rng.integers(0, 4, n_wall)
    along, height = rng.uniform(-30, 30, n_wall), rng.uniform(-1.7, 2.5, n_wall)
    offset = np.where(side % 2 == 0, 12.0, -15.0)
    walls = np.where((side < 2)[:, None], np.c_[along, offset, height], np.c_[offset, along, height])
    centres = rng.uniform(-25, 25, (12, 2))
    which, angle = rng.integers(0, 12, n_pole), rng.uniform(0, 2 * np.pi, n_pole)
    poles = np.c_[centres[which, 0] + 0.15 * np.cos(angle), centres[which, 1] + 0.15 * np.sin(angle),
                  rng.uniform(-1.7, 4.0, n_pole)]
    xyz = np.concatenate([ground, walls, poles])
    return np.c_[xyz, rng.random(points)].astype(np.float32)


def load_points(name: str, seed: int = 0) -> np.ndarray:
    """The ``(P, 4)`` points of cloud ``name`` (the registry: embedded, cache, mirror, download)."""
    check_cloud_name(name)
    if name.startswith(SYNTHETIC_PREFIX):
        return synthetic_scan(int(name[len(SYNTHETIC_PREFIX):]), seed)
    return np.asarray(load(name), dtype=np.float32)


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
        from ..ops import voxelize  # noqa: PLC0415 - the compiler loads after the thread settings

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
        from ..ops import kernel_map  # noqa: PLC0415

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
    """One layer's inputs, as every contender reads them (see :mod:`baselines.conv`)."""

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
    from ..ops import kernel_map  # noqa: PLC0415

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


# ---------------------------------------------------------------- contenders


@dataclass
class Contender:
    """A named way to run a layer (``factory(layer)``) and a network (``network_factory(network)``), each
    returning ``run()``; None with ``reason`` when unavailable."""

    name: str
    factory: Callable | None
    network_factory: Callable | None = None
    kind: str = "baseline"
    reason: str | None = None
    variant: str | None = None


def contender_name(fmt: str | None) -> str:
    """``sparsetir`` (None), ``sparsetir-auto`` (``"auto"``), else ``sparsetir[<format>]``."""
    if fmt is None:
        return SPARSETIR
    return f"{SPARSETIR}-auto" if fmt == "auto" else f"{SPARSETIR}[{fmt}]"


def format_option(value) -> str | None:
    """A format as configs spell it: null/default/none mean format=None."""
    return None if value is None or str(value).strip().lower() in ("", "default", "none", "null") else str(value)


def _sparsetir_kernel(layer: ConvLayer, fmt, tune_budget_s):
    from ..ops import compile_sparse_conv3d  # noqa: PLC0415 - the compiler loads after the thread settings

    if fmt == "auto":
        import os  # noqa: PLC0415

        import sparsetir.tune  # noqa: F401, PLC0415 - registers the answer to format="auto"

        os.environ["SPARSETIR_TUNE_BUDGET_S"] = str(DEFAULT_TUNE_BUDGET_S if tune_budget_s is None else tune_budget_s)
    kmap = layer.kmap
    return compile_sparse_conv3d(kmap, int(layer.W.shape[1]), int(layer.W.shape[2]), format=fmt)


def _variant(kernel) -> str:
    return f"{kernel.spec['format']} dataflow={kernel.spec['dataflow']} {kernel.spec.get('feature_loops', 'kl')}"


def sparsetir_factory(layer: ConvLayer, *, format=None, tune_budget_s=None):
    """``run()`` of sparsetir's kernel for the layer (compiled, and tuned for ``"auto"``, now), into a
    preallocated output; ``run.timings``: conversion, compile and tuning seconds."""
    import torch  # noqa: PLC0415

    kernel = _sparsetir_kernel(layer, format, tune_budget_s)
    X, W = torch.from_numpy(layer.X), torch.from_numpy(layer.W)
    out = torch.empty(layer.kmap.num_outputs, layer.W.shape[2])

    def run():
        return kernel(X, W, out=out)

    run.timings = {"convert_s": kernel.timings["convert_s"], "compile_s": kernel.timings["compile_s"],
                   "tune_s": kernel.timings.get("tune_s")}
    run.variant, run.rows = _variant(kernel), None
    return run


def sparsetir_network_factory(network: ConvNetwork, *, format=None, tune_budget_s=None):
    """``run()`` of the network with sparsetir's kernels (one per layer), ReLU in place between them."""
    import torch  # noqa: PLC0415

    kernels = [_sparsetir_kernel(layer, format, tune_budget_s) for layer in network.layers]
    weights = [torch.from_numpy(layer.W) for layer in network.layers]
    buffers = [torch.empty(layer.kmap.num_outputs, layer.W.shape[2]) for layer in network.layers]
    X = torch.from_numpy(network.X)

    def run():
        h = X
        for index, (kernel, W, out) in enumerate(zip(kernels, weights, buffers)):
            h = kernel(h, W, out=out)
            if index + 1 < len(kernels):
                torch.relu_(h)
        return h

    run.timings = {key: sum(k.timings.get(key) or 0.0 for k in kernels) for key in ("convert_s", "compile_s")}
    run.timings["tune_s"] = sum(k.timings.get("tune_s") or 0.0 for k in kernels) if format == "auto" else None
    run.variant = "; ".join(dict.fromkeys(_variant(k) for k in kernels))
    run.rows = None
    return run


def sparsetir_contender(fmt=None, *, tune_budget_s=None) -> Contender:
    fmt = format_option(fmt)
    return Contender(contender_name(fmt),
                     lambda layer: sparsetir_factory(layer, format=fmt, tune_budget_s=tune_budget_s),
                     lambda network: sparsetir_network_factory(network, format=fmt, tune_budget_s=tune_budget_s),
                     kind=SPARSETIR)


def baseline_contenders(names: Sequence[str] | None = None, *, device: str = "cpu") -> list[Contender]:
    """The declared convolution baselines (``baselines.variants("conv")``: all, or ``names`` in that order),
    each with its availability on ``device`` and its network form where one is declared."""
    networks = declared.variants("conv-network")
    contenders = []
    for name, entry in declared.variants(EXPERIMENT, names).items():
        ok, reason = entry.available(device)
        factory = (lambda layer, entry=entry: entry.build(layer, device=device)) if ok else None
        network = (lambda net, entry=networks[name]: entry.build(net, device=device)) if ok and name in networks \
            else None
        contenders.append(Contender(name, factory, network, reason=None if ok else reason))
    return contenders


def default_contenders(sparsetir_formats: Mapping[str, str | None] | Sequence[str | None] = (None,),
                       baselines: Sequence[str] | None = None, *, tune_budget_s=None) -> list[Contender]:
    """The sparsetir contenders (formats, or ``{name: format}``) followed by the baselines."""
    if isinstance(sparsetir_formats, Mapping):
        ours = []
        for name, fmt in sparsetir_formats.items():
            contender = sparsetir_contender(fmt, tune_budget_s=tune_budget_s)
            contender.name = name
            ours.append(contender)
    else:
        ours = [sparsetir_contender(fmt, tune_budget_s=tune_budget_s) for fmt in sparsetir_formats]
    return ours + baseline_contenders(baselines)


# ---------------------------------------------------------------- checking and timing


@dataclass
class Outcome:
    """One contender on one case: its run (when correct), set-up times, stats, or why not."""

    contender: Contender
    run: Callable | None = None
    error: str | None = None
    status: str = "ok"
    setup_s: float | None = None
    timings: dict | None = None
    stats: object | None = None
    map_s: float | None = None
    wrong_rows: int | None = None
    build_map: Callable | None = None  # the library's own kernel-map builder (spconv's rules)


def check(contender: Contender, factory, inputs, case: Case) -> Outcome:
    """Build ``contender`` (timed) and compare its output with the reference; a wrong one is not timed and
    says how many output rows differ."""
    outcome = Outcome(contender)
    if factory is None:
        outcome.status = "unavailable"
        outcome.error = f"unavailable: {contender.reason or 'no such variant for this case'}"
        return outcome
    started = time.perf_counter()
    try:
        run = factory(inputs)
    except Exception as error:  # reported in the record; the other contenders go on
        outcome.status, outcome.error = "failed", f"failed to build: {type(error).__name__}: {error}"
        return outcome
    outcome.setup_s = time.perf_counter() - started
    outcome.timings = getattr(run, "timings", None)
    outcome.map_s = getattr(run, "map_s", None)
    outcome.build_map = getattr(run, "build_map", None)
    contender.variant = getattr(run, "variant", contender.variant)
    try:
        got = host_array(run())
    except Exception as error:
        outcome.status, outcome.error = "failed", f"failed when called: {type(error).__name__}: {error}"
        return outcome
    rows = getattr(run, "rows", None)
    if rows is not None:
        got = got[rows]
    if got.shape != case.reference.shape:
        outcome.status = "wrong"
        outcome.error = f"wrong result: shape {got.shape}, expected {case.reference.shape}"
        return outcome
    bad = ~(np.abs(got - case.reference) <= case.tolerance)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        outcome.wrong_rows = int(bad.any(axis=1).sum())
        outcome.status = "wrong"
        outcome.error = (f"wrong result: {outcome.wrong_rows} of {got.shape[0]} output rows differ (first: row {row}, "
                         f"largest error {np.nanmax(np.abs(got - case.reference)):.3g})")
        return outcome
    outcome.run = run
    return outcome


def time_outcomes(outcomes: Sequence[Outcome], timing: TimingPolicy) -> None:
    runnable = {o.contender.name: o.run for o in outcomes if o.run is not None}
    if runnable:
        stats = time_interleaved(runnable, timing)
        for outcome in outcomes:
            outcome.stats = stats.get(outcome.contender.name)


def time_maps(layer: ConvLayer, spconv_build: Callable | None, timing: TimingPolicy) -> dict:
    """Median seconds of building the layer's kernel map: sparsetir's ``kernel_map`` and spconv's rules,
    interleaved (``{"sparsetir": ..., "spconv": ...}``; spconv absent when it cannot run)."""
    from ..ops import kernel_map  # noqa: PLC0415

    def ours():
        return kernel_map(layer.coords, kernel_size=layer.kernel_size, stride=layer.stride, dilation=layer.dilation,
                          spatial_shape=layer.spatial_shape)

    builders = {"sparsetir": ours, **({"spconv": spconv_build} if spconv_build else {})}
    stats = time_interleaved(builders, timing.replace(samples=MAP_SAMPLES, min_samples=min(3, MAP_SAMPLES),
                                                      warmup_s=0.0, min_warmup=1))
    return {name: stat.to_dict() for name, stat in stats.items()}


def _best_baseline(outcomes: Sequence[Outcome]) -> tuple[str | None, float | None]:
    timed = [(o.stats.median, o.contender.name) for o in outcomes
             if o.stats is not None and o.contender.kind != SPARSETIR]
    if not timed:
        return None, None
    median, name = min(timed)
    return name, median


# ---------------------------------------------------------------- cases


def _records(outcomes, *, case: str, dataset: str, label: str, scan: Scan, feat: int, shape, nnz: int, flops: int,
             min_bytes: int, where: dict, extra: dict, maps: dict | None) -> list[dict]:
    best, best_median = _best_baseline(outcomes)
    records = []
    for outcome in outcomes:
        contender = outcome.contender
        status, reason = ("ok", None) if outcome.stats is not None else (
            outcome.status if outcome.status != "ok" else "failed", short_reason(outcome.error or "not timed"))
        times = {key: (outcome.timings or {}).get(key) for key in ("convert_s", "compile_s", "tune_s")}
        times["setup_s"] = outcome.setup_s
        library = "spconv" if contender.name.startswith("spconv") else "sparsetir"
        map_stats = (maps or {}).get(library)
        record = make_record(experiment=EXPERIMENT, op=EXPERIMENT, device="cpu", dataset=dataset, feat=feat,
                             contender=contender.name, status=status, reason=reason,
                             stats=outcome.stats.to_dict() if outcome.stats else None, shape=shape, nnz=nnz,
                             variant=contender.variant, times=times, min_bytes=min_bytes, flops=flops,
                             provenance=where)
        record["case"] = f"{scan.name} {scan.voxel_size:g} m {label}"  # one case per layer (the report's key)
        record["conv"] = {
            "case": case, "layer": label, "voxel_size": scan.voxel_size, "kind": contender.kind,
            "kernel_size": scan.kernel_size, "dilation": scan.dilation, **extra,
            "best_baseline": best, "speedup_vs_best": (best_median / outcome.stats.median
                                                       if best_median and outcome.stats else None),
            "map_s": map_stats["median"] if map_stats else outcome.map_s, "map_stats": map_stats,
            "map_library": library if map_stats else None, "wrong_rows": outcome.wrong_rows,
        }
        records.append(record)
    return records


def benchmark_layer(scan: Scan, spec: LayerSpec, contenders: Sequence[Contender], *, timing: TimingPolicy,
                    seed: int = 0, threads: int | None = None, say=print) -> list[dict]:
    """Every contender on one layer (see the module docstring): one record each."""
    layer = layer_inputs(scan, spec, seed)
    kmap = layer.kmap
    case = conv_reference(kmap, layer.X, layer.W)
    outcomes = [check(c, c.factory, layer, case) for c in contenders]
    spconv_build = next((o.build_map for o in outcomes if o.build_map is not None), None)
    maps = time_maps(layer, spconv_build, timing)
    time_outcomes(outcomes, timing)
    say(f"  layer {spec}: {kmap.num_inputs:,} -> {kmap.num_outputs:,} voxels, {kmap.num_pairs:,} pairs; map "
        + ", ".join(f"{k} {v['median'] * 1e3:.1f} ms" for k, v in maps.items()) + "; "
        + ", ".join(f"{o.contender.name} " + (f"{o.stats.median * 1e3:.2f} ms" if o.stats else o.status)
                    for o in outcomes))
    extra = {"c_in": spec.c_in, "c_out": spec.c_out, "stride": spec.stride, "level": spec.level,
             "inputs": kmap.num_inputs, "outputs": kmap.num_outputs, "pairs": kmap.num_pairs}
    where = provenance(flush=timing.flush, extra={"timing": timing.to_dict(), "threads": threads or usable_cores()})
    return _records(outcomes, case="layer", dataset=scan.name, label=str(spec), scan=scan, feat=spec.c_in,
                    shape=(kmap.num_outputs, kmap.num_inputs), nnz=kmap.num_pairs,
                    flops=conv_flops(kmap.num_pairs, (spec.c_in, spec.c_out)), min_bytes=case.min_bytes,
                    where=where, extra=extra, maps=maps)


def benchmark_network(scan: Scan, specs: Sequence[LayerSpec], contenders: Sequence[Contender], *,
                      timing: TimingPolicy, seed: int = 0, threads: int | None = None, say=print) -> list[dict]:
    """Every contender on the whole network: one record each (``case: "network"``)."""
    network = network_inputs(scan, specs, seed)
    ours_map_s = network_map_seconds(scan, specs)
    case = network_reference(network)
    outcomes = [check(c, c.network_factory, network, case) for c in contenders]
    time_outcomes(outcomes, timing)
    pairs = sum(layer.kmap.num_pairs for layer in network.layers)
    flops = sum(conv_flops(layer.kmap.num_pairs, (layer.spec.c_in, layer.spec.c_out)) for layer in network.layers)
    say(f"  network {len(specs)} layers, {pairs:,} pairs: "
        + ", ".join(f"{o.contender.name} " + (f"{o.stats.median * 1e3:.2f} ms" if o.stats else o.status)
                    for o in outcomes))
    for outcome in outcomes:
        if outcome.contender.kind == SPARSETIR or outcome.contender.name == "torch-gather-mm":
            outcome.map_s = ours_map_s
    label = f"network ({len(specs)} layers)"
    extra = {"c_in": specs[0].c_in, "c_out": specs[-1].c_out, "layers": len(specs),
             "network": [f"{s.c_in}:{s.c_out}:{s.stride}" for s in specs],
             "inputs": len(network.coords), "outputs": network.layers[-1].kmap.num_outputs, "pairs": pairs}
    where = provenance(flush=timing.flush, extra={"timing": timing.to_dict(), "threads": threads or usable_cores()})
    return _records(outcomes, case="network", dataset=scan.name, label=label, scan=scan, feat=specs[0].c_in,
                    shape=(network.layers[-1].kmap.num_outputs, len(network.coords)), nnz=pairs, flops=flops,
                    min_bytes=0, where=where, extra=extra, maps=None)


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
        return unavailable_records(experiment=EXPERIMENT, op=EXPERIMENT, dataset=cloud,
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


# ---------------------------------------------------------------- command line


def geomean(values: Sequence[float]) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def format_records(records: Sequence[dict]) -> str:
    """A table: per case and contender, median ms, speedup over the best baseline, map and compile times."""
    lines = [f"{'case':<24}{'contender':<22}{'median ms':>11}{'vs best':>9}{'% FMA':>7}{'% mem':>7}{'map ms':>9}"
             f"{'compile s':>10}{'tune s':>8}  note"]
    for record in records:
        conv = record.get("conv") or {}
        stats, times = record.get("stats") or {}, record["times"]
        speedup, map_s = conv.get("speedup_vs_best"), conv.get("map_s")
        compile_s, tune_s = times.get("compile_s"), times.get("tune_s")
        median = f"{stats['median'] * 1e3:.3f}" if stats else "-"
        fma, memory = rate_percentages(record)
        lines.append(
            f"{conv.get('layer', '*')[:23]:<24}{record['contender']:<22}{median:>11}"
            f"{(f'{speedup:.2f}x' if speedup else '-'):>9}{(f'{fma:.0f}' if fma else '-'):>7}"
            f"{(f'{memory:.0f}' if memory else '-'):>7}{(f'{map_s * 1e3:.1f}' if map_s else '-'):>9}"
            f"{(f'{compile_s:.2f}' if compile_s is not None else '-'):>10}"
            f"{(f'{tune_s:.1f}' if tune_s is not None else '-'):>8}  " + (record.get("reason") or ""))
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sparsetir.bench.conv", description=__doc__.split("\n\n")[0],
        epilog="Every contender is checked against the float64 reference before timing; see the module docstring "
               "of sparsetir.bench.conv.")
    parser.add_argument("--cloud", action="append",
                        help=f"point cloud: {', '.join(point_clouds())}, or {SYNTHETIC_PREFIX}<points> (repeatable; "
                             "default kitti-000000)")
    parser.add_argument("--voxel-size", type=float, action="append", help="voxel edge in metres (repeatable; 0.2)")
    parser.add_argument("--layer", action="append", dest="layers", metavar="C_IN:C_OUT:STRIDE@LEVEL",
                        help=f"a per-layer case (repeatable; default {' '.join(DEFAULT_LAYERS)})")
    parser.add_argument("--network", nargs="*", metavar="C_IN:C_OUT:STRIDE",
                        help=f"the end-to-end network's layers (default {' '.join(DEFAULT_NETWORK)})")
    parser.add_argument("--no-network", action="store_true", help="skip the end-to-end network")
    parser.add_argument("--kernel-size", type=int, default=3, help="kernel size of every layer (default 3)")
    parser.add_argument("--dilation", type=int, default=1, help="dilation of every layer (default 1)")
    parser.add_argument("--format", action="append", dest="formats", metavar="FORMAT",
                        help="a sparsetir contender per format (repeatable): default (csf, named sparsetir), auto "
                             "(tuned per layer, sparsetir-auto) or a relational format, e.g. relcsr")
    parser.add_argument("--tune-budget-s", type=float, default=None,
                        help=f"tuning seconds per layer for --format auto (default {DEFAULT_TUNE_BUDGET_S:g})")
    parser.add_argument("--baseline", action="append", dest="baselines", metavar="NAME",
                        help="only these baselines of baselines/conv.py (repeatable; default all)")
    parser.add_argument("--samples", type=int, default=20, help="timed calls per contender (default 20)")
    parser.add_argument("--max-time-s", type=float, default=10.0, help="cap on each case's sampling time")
    parser.add_argument("--no-flush", action="store_true", help="do not flush the cache before each call")
    parser.add_argument("--threads", type=int, default=usable_cores(), help="threads for torch and TVM")
    parser.add_argument("--seed", type=int, default=0, help="seed of the features and weights (default 0)")
    parser.add_argument("--json", help="write the records (a JSON list) to this file")
    args = parser.parse_args(argv)
    args.cloud = args.cloud or ["kitti-000000"]
    args.voxel_size = args.voxel_size or [0.2]
    args.layers = args.layers if args.layers is not None else list(DEFAULT_LAYERS)
    args.network = [] if args.no_network else (args.network if args.network is not None else list(DEFAULT_NETWORK))
    args.formats = [format_option(f) for f in (args.formats or ["default"])]
    try:
        for name in args.cloud:
            check_cloud_name(name)
        for text in args.layers:
            parse_layer(text)
        for text in args.network:
            parse_layer(text, network=True)
        if any(v <= 0 for v in args.voxel_size):
            raise ValueError("voxel sizes must be positive")
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for warning in configure_threads(args.threads):  # before torch and TVM load
        print(warning, file=sys.stderr)
    import torch  # noqa: PLC0415 - after the thread settings

    torch.set_num_threads(args.threads)
    timing = DEFAULT.replace(flush=not args.no_flush, samples=args.samples, max_time_s=args.max_time_s,
                             seed=args.seed, min_warmup=3, warmup_s=0.0, min_samples=min(5, args.samples))
    contenders = default_contenders(args.formats, args.baselines, tune_budget_s=args.tune_budget_s)
    flush = f"flush {default_flush_bytes() >> 20} MiB" if timing.flush else "no flush"
    print(f"sparse conv: {args.threads} threads, {flush}, kernel {args.kernel_size}, dilation {args.dilation}")
    records = []
    for cloud in args.cloud:
        for voxel_size in args.voxel_size:
            found = benchmark_scan(cloud, voxel_size, contenders, layers=args.layers, network=args.network,
                                   kernel_size=args.kernel_size, dilation=args.dilation, timing=timing,
                                   seed=args.seed, threads=args.threads,
                                   progress=lambda message: print(message, file=sys.stderr, flush=True))
            print(f"\n{cloud} at {voxel_size} m")
            print(format_records(found))
            for name in dict.fromkeys(r["contender"] for r in found if (r.get("conv") or {}).get("kind") == SPARSETIR):
                values = [r["conv"]["speedup_vs_best"] for r in found
                          if r["contender"] == name and r["conv"]["case"] == "layer"]
                value = geomean(values)
                if value:
                    print(f"{name}: per-layer geomean {value:.2f}x over the best baseline (min "
                          f"{min(v for v in values if v):.2f}x, {len(values)} layers)")
            records += found
    if args.json:
        write_json_atomic(args.json, records)
    return 0 if any(record["status"] == "ok" for record in records) else 1


if __name__ == "__main__":
    sys.exit(main())
