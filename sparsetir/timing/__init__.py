"""The one timer and its policy: every measurement in the project goes through here.

Bottom layer: it imports only ``sparsetir.runtime`` (for the usable core count), so the
compiler, the tuner, the benchmark and the GPU bundle runner (runtime only) can all use it.
"""

from .environment import environment_info, package_versions
from .policy import BUNDLE, DEFAULT, FINALISTS, TUNING, TimingPolicy
from .timer import (
                    CUDA_FLUSH_BYTES,
                    Stats,
                    cpu_flush_buffer,
                    default_flush_bytes,
                    flush_cpu_cache,
                    llc_bytes,
                    sample_calls,
                    time_cpu,
                    time_cuda,
                    time_interleaved,
                    warmup_calls,
)

__all__ = ["BUNDLE", "CUDA_FLUSH_BYTES", "DEFAULT", "FINALISTS", "TUNING", "Stats", "TimingPolicy", "cpu_flush_buffer",
           "default_flush_bytes", "environment_info", "flush_cpu_cache", "llc_bytes", "package_versions",
           "sample_calls", "time_cpu", "time_cuda", "time_interleaved", "warmup_calls"]
