"""Provenance of a measurement: package versions, CPU, threads, spin settings, flush size, and the
machine's state when it was taken (``machine.machine_snapshot``: load, memory, cpufreq, threads)."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from ..runtime.loader import usable_cores
from .machine import machine_snapshot
from .timer import default_flush_bytes, llc_bytes

_VERSIONED_PACKAGES = {"numpy": "numpy", "scipy": "scipy", "torch": "torch", "tvm": "apache-tvm", "tvm_ffi": "apache-tvm-ffi"}
_THREAD_ENV = ("GOMP_SPINCOUNT", "TVM_THREAD_POOL_SPIN_COUNT", "OMP_NUM_THREADS", "TVM_NUM_THREADS", "MKL_NUM_THREADS")


def package_versions() -> dict:
    """Python's version and those of the packages timings depend on (None when not installed),
    from package metadata, so nothing heavy is imported."""
    versions = {"python": platform.python_version()}
    for key, distribution in _VERSIONED_PACKAGES.items():
        try:
            versions[key] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            versions[key] = None
    return versions


def environment_info(*, flush: bool = True, flush_bytes: int | None = None) -> dict:
    """Provenance for a timing record: versions, CPU, threads, spin settings, flush.

    Versions come from package metadata, so nothing heavy is imported; torch's thread count
    and CUDA details are included only when torch is already imported.
    """
    info = {
        "versions": package_versions(),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cores(),
        "llc_bytes": llc_bytes(),
        "env": {name: os.environ.get(name) for name in _THREAD_ENV},
        "flush": flush,
        "flush_bytes": (default_flush_bytes() if flush_bytes is None else int(flush_bytes)) if flush else 0,
        "timer": "time.perf_counter_ns",
        "machine": machine_snapshot(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_threads"] = torch.get_num_threads()
        info["versions"]["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name()
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
