"""Tune on a CPU host, measure on a GPU host: build a bundle of compiled candidates, run it, ingest the records.

    python -m sparsetir.bench.bundle build --dataset cora --feat 64 --out results/gpu-bundle
    bash results/gpu-bundle/run.sh --out "$OUT"          # on the GPU host (TVM runtime only)
    python -m sparsetir.bench.bundle ingest --records <folder the records came back in>

``build.py`` compiles (compile host), ``runner.py`` runs (GPU host), ``ingestion.py`` reads the
records back; ``manifest.py`` is what they share. The runner must import without the TVM
compiler, so this package loads ``build_bundle`` and ``ingest`` (compile-host code) on first use.
"""

import importlib

from .manifest import BUNDLE_FORMAT, CANDIDATE_PREFIX, read_manifest

_LAZY = {"build_bundle": "build", "BundleTooLarge": "build", "folder_bytes": "build", "runner_wheels": "build",
         "ingest": "ingestion"}


def __getattr__(name):
    if name in _LAZY:  # compile-host code, kept out of the runtime-only runner's imports
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BUNDLE_FORMAT", "CANDIDATE_PREFIX", "BundleTooLarge", "build_bundle", "folder_bytes", "ingest",
           "read_manifest", "runner_wheels"]
