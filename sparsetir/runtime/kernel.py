"""Kernel: a compiled op bound to one sparse structure; call it with the dense operands.

The structure (indptr, indices, sizes) was validated once when the kernel was
made; each call checks only the dense operands, so calls are cheap. Values are a
runtime argument: ``kernel(B, values=new_values)`` needs no recompile.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .function import CompiledFunction, sidecar
from .marshal import aligned_empty, is_torch
from .signature import evaluate
from .validate import check_dense, dtype_name


class Kernel:
    """``spec``: op, inputs (parameter names in call order), output, values (parameter name)."""

    def __init__(self, function: CompiledFunction, spec: dict, bound: dict, sizes: dict):
        self.function = function
        self.spec = spec
        self.sizes = dict(sizes)
        self._bound = dict(bound)  # structure arrays and default values, by parameter name
        self._prepared: dict | None = None  # the same, converted once for the kernel
        params = {p["name"]: p for p in function.signature.params}
        self._shape = {name: tuple(evaluate(e, self.sizes) for e in params[name]["shape"])
                       for name in [*spec["inputs"], spec["output"], spec["values"]]}
        self._dtype = {name: params[name]["dtype"] for name in self._shape}

    @property
    def source(self) -> str:
        """Generated source: CUDA C for CUDA kernels, LLVM IR for CPU kernels."""
        return self.function.source

    @property
    def device(self) -> str:
        return self.function.device

    def output_shape(self) -> tuple:
        return self._shape[self.spec["output"]]

    def __call__(self, *inputs, out=None, values=None):
        names = self.spec["inputs"]
        if len(inputs) != len(names):
            raise TypeError(f"{self.spec['op']} kernel takes {len(names)} operand(s) {names}, got {len(inputs)}")
        if self.device == "cuda":
            self.function.kernel()  # a clear RuntimeError where no GPU is present
        for name, array in zip(names, inputs):
            _check_array_type(array, name)
            check_dense(array, name=name, shape=self._shape[name], dtype=self._dtype[name])
        arrays = dict(zip(names, inputs))
        prepared = self._structure()
        if values is not None:
            arrays[self.spec["values"]] = self._coerce_values(values)
            prepared = {k: v for k, v in prepared.items() if k != self.spec["values"]}
        output = self.spec["output"]
        if out is None:
            out = _empty_like(inputs[0], self._shape[output], self._dtype[output])
        else:
            _check_array_type(out, "out")
            check_dense(out, name="out", shape=self._shape[output], dtype=self._dtype[output])
        arrays[output] = out
        self.function.invoke(arrays, self.sizes, prepared)
        return out

    def _structure(self) -> dict:
        """The bound arrays converted for the kernel once (moved to the GPU for CUDA kernels)."""
        if self._prepared is None:
            bound = self._bound
            if self.device == "cuda":
                import torch

                bound = {k: torch.as_tensor(v).cuda() for k, v in bound.items()}
            self._prepared = self.function.prepare(bound, self.sizes)
        return self._prepared

    def _coerce_values(self, values):
        name = self.spec["values"]
        _check_array_type(values, "values")
        expected = self._shape[name]
        if tuple(values.shape) != expected:
            raise ValueError(f"values has shape {tuple(values.shape)}, expected {expected} (one per non-zero)")
        if dtype_name(values) == self._dtype[name]:
            return values
        if is_torch(values):
            import torch

            return values.to(getattr(torch, self._dtype[name]))
        return values.astype(self._dtype[name])

    def export(self, path) -> Path:
        """Write the library to ``path``; beside it ``<path>.json`` (manifest) and ``<path>.npz`` (structure)."""
        path = self.function.export(path, kernel={"spec": self.spec, "sizes": self.sizes})
        np.savez(sidecar(path, ".npz"), **{k: _host(v) for k, v in self._bound.items()})
        return path

    def __repr__(self) -> str:
        return f"Kernel({self.spec['op']}, {self.spec.get('format', '?')}, {self.device}, sizes={self.sizes})"


def load_kernel(path) -> Kernel:
    """Load an exported kernel (library plus sidecars); needs only the TVM runtime."""
    path = Path(path)
    function = CompiledFunction(path)
    meta = json.loads(sidecar(path, ".json").read_text())
    if "kernel" not in meta:
        raise ValueError(f"{path} holds a compiled function, not a bound kernel")
    with np.load(sidecar(path, ".npz"), allow_pickle=False) as arrays:
        bound = {name: arrays[name] for name in arrays.files}
    return Kernel(function, meta["kernel"]["spec"], bound, meta["kernel"]["sizes"])


def _check_array_type(array, name: str) -> None:
    if not (isinstance(array, np.ndarray) or is_torch(array)):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(array).__name__}")


def _empty_like(reference, shape, dtype):
    if is_torch(reference):
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device=reference.device)
    return aligned_empty(shape, dtype)


def _host(array):
    return array if isinstance(array, np.ndarray) else array.detach().cpu().numpy()
