"""sparsetir: a composable sparse-tensor compiler on Apache TVM 0.27.

Stage I (``sparsetir.ir``) -> Stage II (``lower.lower_sparse_iter``) -> Stage III TensorIR
(``lower.lower_sparse_buffer``) -> schedule (``sparsetir.schedule``) -> build (``sparsetir.build``, in ``sparsetir.backend``).
Heavy TVM imports are lazy, so ``sparsetir.runtime`` works with only the TVM runtime installed.
"""

__version__ = "0.1.0"

_LAZY = {
    "build": ("sparsetir.backend", "build"),
    "compile_spmm": ("sparsetir.ops.spmm", "compile_spmm"),
    "compile_sddmm": ("sparsetir.ops.sddmm", "compile_sddmm"),
}


def __getattr__(name):
    import importlib

    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    if name in {"ir", "lower", "transform", "schedule", "ops", "formats", "runtime", "data", "bench", "backend"}:
        return importlib.import_module(f"sparsetir.{name}")
    raise AttributeError(f"module 'sparsetir' has no attribute {name!r}")


__all__ = ["build", "compile_spmm", "compile_sddmm", "__version__"]
