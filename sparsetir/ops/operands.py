"""Shared checks and kernel construction for the user-level ops."""

from __future__ import annotations

import json
import time

from ..backend import build, device_of, normalize_target
from ..runtime.kernel import Kernel
from ..runtime.marshal import is_torch
from ..runtime.validate import dtype_name

DEVICE_DTYPES = {"cpu": ("float32", "float64"), "cuda": ("float16", "float32", "float64")}
_compiled: dict[tuple, object] = {}


def check_dense_operand(array, name: str, *, ndim: int = 2) -> str:
    """A numpy array or torch tensor of ``ndim`` dimensions; returns its dtype name."""
    if not (type(array).__module__ == "numpy" or is_torch(array)) or not hasattr(array, "shape"):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(array).__name__}")
    if len(array.shape) != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(array.shape)}")
    return dtype_name(array)


def check_feat(feat) -> int:
    if isinstance(feat, bool) or not isinstance(feat, int):
        raise TypeError(f"feat must be an int, got {type(feat).__name__}")
    if feat < 1:
        raise ValueError(f"feat must be >= 1, got {feat}")
    return feat


def resolve_dtype(dtype, values_dtype, device: str) -> str:
    """The kernel value dtype: ``dtype`` if given, else A's float dtype (float32 for other kinds)."""
    if dtype is None:
        dtype = values_dtype.name if values_dtype.name in ("float32", "float64") else "float32"
    dtype = str(dtype).replace("torch.", "")
    if dtype not in DEVICE_DTYPES[device]:
        raise TypeError(f"dtype {dtype} is not supported on {device}; supported: {DEVICE_DTYPES[device]}")
    return dtype


def compiled_function(op: str, make_function, fmt, feat: int, dtype: str, idtype: str, target: dict, knobs: dict):
    """Compile (once per process and key) the Stage I function ``make_function()`` builds."""
    key = (op, fmt.structure_key(), feat, dtype, idtype, json.dumps(target, sort_keys=True),
           tuple(sorted(knobs.items())))
    if key not in _compiled:
        _compiled[key] = build(make_function(), target, **knobs)
    return _compiled[key]


def make_kernel(op: str, make_function, fmt, matrix, *, feat, dtype, idtype, target, knobs, inputs, output,
                convert_s: float) -> Kernel:
    """Bind a compiled op to ``matrix``'s structure; records conversion and compile times."""
    started = time.perf_counter()
    function = compiled_function(op, make_function, fmt, feat, dtype, idtype, target, knobs)
    compile_s = time.perf_counter() - started
    spec = {"op": op, "format": fmt.name, "feat": feat, "dtype": dtype, "index_dtype": idtype,
            "inputs": inputs, "output": output, "values": "A"}
    kernel = Kernel(function, spec, {**fmt.bind(matrix), "A": matrix.values}, fmt.sizes(matrix))
    kernel.timings = {"convert_s": convert_s, "compile_s": compile_s}
    return kernel


def target_and_device(target) -> tuple[dict, str]:
    target = normalize_target(target)
    return target, device_of(target)
