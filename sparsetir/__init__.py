"""sparsetir: a composable sparse-tensor compiler on Apache TVM 0.27.

Stage I (``sparsetir.ir``) -> Stage II (``lower.lower_sparse_iter``) -> Stage III TensorIR
(``lower.lower_sparse_buffer``) -> schedule (``sparsetir.schedule``) -> build (``sparsetir.build``,
in ``sparsetir.backend``).

This facade imports nothing heavy, so ``sparsetir.runtime`` works with only the TVM runtime
installed: the names below load their layer on first use. It registers the answer to
``format="auto"`` as a stand-in that imports ``sparsetir.tune`` (which then registers itself)
when an op first asks for it. ``docs/architecture.md`` describes the layers.
"""

import importlib

from . import hooks
from .version import __version__

_LAYERS = {"backend", "bench", "data", "formats", "ir", "lower", "ops", "runtime", "schedule", "testing", "timing",
           "transform", "tune"}


def _auto_config(*args, **kwargs):
    """``format="auto"`` before ``sparsetir.tune`` is imported: import it (it registers the real resolver)."""
    tune = importlib.import_module("sparsetir.tune")
    return tune.auto_config(*args, **kwargs)


if hooks._format_resolver is None:
    hooks.register_format_resolver(_auto_config)


def __getattr__(name):
    if name == "build":
        return importlib.import_module("sparsetir.backend").build
    if name in _LAYERS:
        return importlib.import_module(f"sparsetir.{name}")
    if name.startswith("compile_"):  # compile_<op> of every registered op
        ops = importlib.import_module("sparsetir.ops")
        if name in getattr(ops, "__all__", ()):
            return getattr(ops, name)
    raise AttributeError(f"module 'sparsetir' has no attribute {name!r}")


__all__ = ["build", "compile_sddmm", "compile_spmm", "__version__"]
