"""The one timer and its policy: every measurement in the project goes through here.

Bottom layer: it imports only ``sparsetir.runtime`` (for the usable core count), so the
compiler, the tuner, the benchmark and the GPU bundle runner (runtime only) can all use it.
"""

from .environment import environment_info, package_versions
from .interference import Sentinel, interference_report, merge_reports
from .machine import MachineBusyError, busy_reasons, machine_snapshot, machine_state, require_quiet_machine
from .policy import (
                     BUNDLE,
                     DEFAULT,
                     FINALISTS,
                     TUNING,
                     TimingPolicy,
                     clear_worker_share,
                     set_worker_share,
                     share_of,
                     worker_share,
)
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

__all__ = ["BUNDLE", "CUDA_FLUSH_BYTES", "DEFAULT", "FINALISTS", "TUNING", "MachineBusyError", "Sentinel", "Stats",
           "TimingPolicy", "busy_reasons", "clear_worker_share", "cpu_flush_buffer", "default_flush_bytes", "environment_info",
           "flush_cpu_cache", "interference_report", "llc_bytes", "machine_snapshot", "machine_state",
           "merge_reports", "package_versions", "require_quiet_machine", "sample_calls", "set_worker_share", "share_of", "time_cpu", "time_cuda",
           "time_interleaved", "warmup_calls", "worker_share"]
