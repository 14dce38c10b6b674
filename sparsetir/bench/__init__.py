"""Benchmarking: the one timer (``timer``) and the quick CPU comparison CLI (``quick``).

``python -m sparsetir.bench.quick spmm --dataset pubmed --feat 64``
"""

from .timer import Stats, environment_info, time_cpu, time_cuda, time_interleaved

__all__ = ["Stats", "environment_info", "time_cpu", "time_cuda", "time_interleaved"]
