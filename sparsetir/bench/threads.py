"""Thread counts and spin limits, set before torch or TVM load (they read them once, at load).

Idle thread pools must go to sleep quickly. After each parallel region torch's OpenMP
(libgomp) workers and TVM's pool busy-wait (default ~300k spins) for the next one; in an
interleaved A/B run those spinning threads would hold the cores the next contender's threads
need. This module imports nothing heavy, so a command line can call :func:`configure_threads`
first and import the compiler and the baselines afterwards.
"""

from __future__ import annotations

import os
import sys

SPIN_LIMITS = {"GOMP_SPINCOUNT": "10000", "TVM_THREAD_POOL_SPIN_COUNT": "1000"}


def configure_threads(threads: int) -> list[str]:
    """Set spin limits and thread counts (unless already set); must run before torch/tvm load.

    Returns warnings for libraries that were already loaded while a setting was not yet in the
    environment, for which the settings may not apply (none when every setting was there before: a
    worker forked after its parent set them and loaded the libraries).
    """
    settings = {**SPIN_LIMITS, "OMP_NUM_THREADS": str(threads), "TVM_NUM_THREADS": str(threads)}
    missing = [name for name in settings if name not in os.environ]
    for name in missing:
        os.environ[name] = settings[name]
    return [
        f"note: {module} was imported before the spin/thread settings; they may not apply to it"
        for module in ("torch", "tvm")
        if missing and module in sys.modules
    ]
