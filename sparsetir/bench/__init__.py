"""The benchmark harness layer: engine, quick CLI, workflow case runner, records, GPU bundle.

``python -m sparsetir.bench.quick spmm --dataset pubmed --feat 64``

The one timer lives below in :mod:`sparsetir.timing` (re-exported here); this is the only layer
that imports the top-level ``baselines`` package.
"""

from ..timing import Stats, TimingPolicy, environment_info, time_cpu, time_cuda, time_interleaved

__all__ = ["Stats", "TimingPolicy", "environment_info", "time_cpu", "time_cuda", "time_interleaved"]
