"""What the machine can do, measured once per run, and three time bounds per case.

:func:`measure_machine` times, through the one timer:

- **copy bandwidth** with 1 and with all threads (torch ``copy_`` of 2x the last-level cache;
  bytes = read + write);
- **gather bandwidth**: random rows of a dense ``(rows, F)`` float32 matrix gathered (the faster
  of torch ``index_select`` on all threads and ``np.take``), from working sets sized for L2, L3
  and DRAM, per feature size, as bytes moved (each row read and written);
- **peak FMA throughput**: a float32 ``mm`` of 1024 x 1024 matrices (all threads), in flop/s.

:func:`case_bounds` then gives a case's time under three models (seconds; a kernel at a bound
would take that long):

``dram``    the op's minimum bytes (``Case.min_bytes``) at the copy bandwidth;
``gather``  the rows of the dense operand a CSR kernel gathers (one ``F``-row per non-zero),
            plus the structure and the output, at the gather bandwidth of the cache level the
            dense operand fits in;
``flops``   the op's flops at the peak FMA throughput.

The tighter bound is the slowest of them (each is a time the kernel cannot beat under its
model); ``% of bound`` is that time over the contender's median.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field

import numpy as np

from ..timing import TimingPolicy, time_interleaved
from ..timing.timer import llc_bytes

L2_BYTES_FALLBACK = 1 << 20
_L2_SYSFS = "/sys/devices/system/cpu/cpu0/cache/index2/size"
GATHER_FEATS = (32, 64, 128, 256)
GATHER_INDICES = 1 << 16  # rows gathered per timed call


def l2_bytes() -> int:
    """The per-core L2 size from sysfs (``1024K``), else 1 MiB."""
    try:
        text = open(_L2_SYSFS).read().strip().upper().rstrip("B")
        units = {"K": 1 << 10, "M": 1 << 20}
        return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
    except (OSError, ValueError, IndexError):
        return L2_BYTES_FALLBACK


@dataclass
class Machine:
    """Measured capabilities (bytes/s, flop/s); ``gather[level][feat]`` in bytes/s."""

    copy_1t: float
    copy_all: float
    threads: int
    gather: dict = field(default_factory=dict)
    fma_flops: float = math.nan
    l2_bytes: int = 0
    l3_bytes: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Machine:
        """A measured machine read back from a file, checked (``ValueError`` otherwise)."""
        try:
            machine = cls(float(data["copy_1t"]), float(data["copy_all"]), int(data["threads"]),
                          {level: {int(f): float(v) for f, v in feats.items()} for level, feats in data["gather"].items()},
                          float(data["fma_flops"]), int(data["l2_bytes"]), int(data["l3_bytes"]))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"not a measured machine: {error}") from None
        values = [machine.copy_1t, machine.copy_all, machine.fma_flops,
                  *(v for feats in machine.gather.values() for v in feats.values())]
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise ValueError("a measured machine holds non-positive or non-finite rates")
        return machine

    def gather_bandwidth(self, working_set: int, feat: int) -> tuple[str, float]:
        """``(level, bytes/s)`` for gathering rows of ``feat`` floats from a ``working_set``-byte matrix."""
        level = "l2" if working_set <= self.l2_bytes else "l3" if working_set <= self.l3_bytes else "dram"
        measured = self.gather.get(level, {})
        if not measured:
            return level, self.copy_all
        nearest = min(measured, key=lambda f: abs(math.log2(f) - math.log2(max(feat, 1))))
        return level, measured[nearest]


def _copy_bandwidth(torch, threads: int, timing: TimingPolicy) -> float:
    size = 2 * llc_bytes()
    source, target = torch.ones(size, dtype=torch.uint8), torch.empty(size, dtype=torch.uint8)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        stats = time_interleaved({"copy": lambda: target.copy_(source)}, timing, samples=min(timing.samples, 20))
    finally:
        torch.set_num_threads(previous)
    return 2 * size / stats["copy"].median


def measure_machine(timing: TimingPolicy, *, feats=GATHER_FEATS, threads: int | None = None) -> Machine:
    """Copy (1 and all threads), gather (L2, L3, DRAM working sets per feature size) and FMA rates."""
    import torch  # noqa: PLC0415 - the harness has torch; the compiler layers do not need it

    threads = threads or torch.get_num_threads()
    l2, l3 = l2_bytes(), llc_bytes()
    machine = Machine(_copy_bandwidth(torch, 1, timing), _copy_bandwidth(torch, threads, timing), threads,
                      l2_bytes=l2, l3_bytes=l3)
    rng = np.random.default_rng(0)
    sets = {"l2": l2 // 2, "l3": l3 // 2, "dram": 8 * l3}
    for level, nbytes in sets.items():
        machine.gather[level] = {}
        for feat in feats:
            rows = max(nbytes // (4 * feat), 16)
            table = torch.ones(rows, feat)
            index = torch.from_numpy(rng.integers(0, rows, GATHER_INDICES))
            out = torch.empty(GATHER_INDICES, feat)
            table_np, index_np, out_np = table.numpy(), index.numpy(), out.numpy()
            methods = {"index_select": lambda t=table, i=index, o=out: torch.index_select(t, 0, i, out=o),
                       "np.take": lambda t=table_np, i=index_np, o=out_np: np.take(t, i, 0, out=o)}
            # no flush: an L2/L3 working set must stay where it is; DRAM's does not fit anyway
            stats = time_interleaved(methods, timing.replace(flush=False), samples=min(timing.samples, 20))
            fastest = min(stat.median for stat in stats.values())
            # bytes moved: each gathered row is read and written; a CSR kernel only reads it (into
            # registers), so counting the gather's reads alone would make the model too slow to be a bound
            machine.gather[level][feat] = 2 * GATHER_INDICES * feat * 4 / fastest
    machine.fma_flops = _fma_rate(torch, timing)
    return machine


def _fma_rate(torch, timing: TimingPolicy) -> float:
    a, b = torch.ones(1024, 1024), torch.ones(1024, 1024)
    c = torch.empty(1024, 1024)
    stats = time_interleaved({"mm": lambda: torch.mm(a, b, out=c)}, timing.replace(flush=False),
                             samples=min(timing.samples, 20))
    return 2 * 1024 ** 3 / stats["mm"].median


def measure_peak_rates(timing: TimingPolicy, *, threads: int | None = None) -> dict:
    """The two rates the families' tables compare against, measured as :func:`measure_machine` does:
    ``{"fma_flops", "copy_bytes_per_s", "threads"}`` (a float32 1024^3 ``mm`` and a copy of 2x LLC, all threads)."""
    import torch  # noqa: PLC0415 - the harness has torch; the compiler layers do not need it

    threads = threads or torch.get_num_threads()
    return {"fma_flops": _fma_rate(torch, timing), "copy_bytes_per_s": _copy_bandwidth(torch, threads, timing),
            "threads": threads}


def rate_percentages(record: dict) -> tuple[float | None, float | None]:
    """``(% of the FMA rate, % of the memory bound)`` of a timed record carrying ``rates``
    (:func:`measure_peak_rates`): its useful flops at the measured FMA rate, and its minimum bytes
    (``min_bytes``, the DRAM model) at the copy bandwidth, each over its median; None where unknown."""
    rates, stats = record.get("rates") or {}, record.get("stats") or {}
    median = stats.get("median")
    if not median or not rates:
        return None, None
    flops, min_bytes = record.get("flops"), record.get("min_bytes")
    fma = 100.0 * flops / rates["fma_flops"] / median if flops and rates.get("fma_flops") else None
    memory = 100.0 * min_bytes / rates["copy_bytes_per_s"] / median if min_bytes and rates.get("copy_bytes_per_s") \
        else None
    return fma, memory


def case_bounds(machine: Machine, *, op: str, shape: tuple, nnz: int, feat: int, min_bytes: int, flops: int) -> dict:
    """The case's time under each model (seconds), the tighter one, and the gather model's cache level."""
    m, n = shape
    dense_rows = n  # SpMM gathers rows of B (n x F); SDDMM gathers rows of Y (n x F) per non-zero
    structure = nnz * (4 + 4) + (m + 1) * 4
    if op == "sddmm":
        gathered = nnz * feat * 4 + structure + nnz * 4 + m * feat * 4  # Y rows per non-zero; X once; out
    else:
        gathered = nnz * feat * 4 + structure + m * feat * 4  # B rows per non-zero; C once
    level, rate = machine.gather_bandwidth(dense_rows * feat * 4, feat)
    bounds = {"dram": min_bytes / machine.copy_all, "gather": gathered / rate,
              "flops": flops / machine.fma_flops if machine.fma_flops > 0 else 0.0}
    tight = max(bounds, key=bounds.get)
    return {"dram_s": bounds["dram"], "gather_s": bounds["gather"], "flops_s": bounds["flops"],
            "gather_level": level, "tight": tight, "tight_s": bounds[tight]}


def percent_of_bound(bounds: dict, median_s: float | None) -> float | None:
    """The tighter bound's time over a contender's median, in percent."""
    if not median_s or not bounds:
        return None
    return 100.0 * bounds["tight_s"] / median_s


def usable_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
