"""Kernel: a compiled op bound to one sparse structure; call it with the dense operands.

The structure (indptr, indices, sizes) was validated once when the kernel was
made; each call checks only the dense operands, so calls are cheap. Values are a
runtime argument: ``kernel(B, values=new_values)`` needs no recompile. For a
format that splits A over several value arrays, a :class:`SlotLayout` moves
values in, and per-non-zero results out, in CSR order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .bound import BoundKernel, empty_like, read_export
from .call_plan import CallPlan
from .function import CompiledFunction, sidecar
from .marshal import check_no_grad, is_torch, may_overlap
from .output_pool import MIN_BYTES, OutputPool
from .signature import Signature, evaluate
from .slot_layout import SlotLayout
from .validate import check_dense, check_permutation, dtype_name, numpy_dtype

VALUE_ORDER = "__value_order"  # the sidecar array holding Kernel.value_order


class Kernel(BoundKernel):
    """``spec``: op, inputs (parameter names in call order), outputs and values (parameter names).

    ``source``, ``device``, ``dtype``, the prepared structure and ``export`` are the shared
    :class:`~sparsetir.runtime.bound.BoundKernel`'s."""

    def __init__(self, function: CompiledFunction, spec: dict, bound: dict, sizes: dict,
                 layout: SlotLayout | None = None, value_order: np.ndarray | None = None):
        super().__init__(function, spec, bound, sizes)
        # values= arrive in the order of the caller's matrix; the kernel's is value_order of it
        # (a kernel compiled for A^T takes A's values: transpose_a)
        self.value_order = None if value_order is None else np.asarray(value_order, dtype=np.int64)
        self.layout = layout
        self._scratch: dict | None = None  # per-slot outputs of a decomposed kernel, reused
        self._outputs = OutputPool()  # outputs of calls without out=, reused once the caller let go
        self._plan: CallPlan | bool | None = None  # the short call path (runtime.call_plan); False: none
        params = {p["name"]: p for p in function.signature.params}
        names = [*spec["inputs"], *spec["outputs"], *spec["values"]]
        self._shape = {name: tuple(evaluate(e, self.sizes) for e in params[name]["shape"]) for name in names}
        self._dtype = {name: params[name]["dtype"] for name in names}
        # integer buffers used as coordinates: the bound ones are checked now, the inputs every call
        self._coordinates = {name: p for name, p in params.items() if p.get("coordinates_of")}
        for name, array in self._bound.items():
            if name in self._coordinates:
                Signature.check_coordinates(self._coordinates[name], array, self.sizes)

    def output_shape(self) -> tuple:
        if self.layout is not None and self.layout.outputs:
            return (self.layout.nnz,)
        return self._shape[self.spec["outputs"][0]]

    def __call__(self, *inputs, out=None, values=None):
        names = self.spec["inputs"]
        if len(inputs) != len(names):
            raise TypeError(f"{self.spec['op']} kernel takes {len(names)} operand(s) {names}, got {len(inputs)}")
        if self.device == "cuda":
            self.function.kernel()  # a clear RuntimeError where no GPU is present
        if values is None and self._plan is not False:
            result = self._short_call(inputs, out)
            if result is not None:
                return result
        for name, array in zip(names, inputs):
            _check_array_type(array, name)
            check_dense(array, name=name, shape=self._shape[name], dtype=self._dtype[name])
            if name in self._coordinates:
                Signature.check_coordinates(self._coordinates[name], array, self.sizes)
        for name, array in zip(names, inputs):
            check_no_grad(array, name)
        if values is not None:
            check_no_grad(values, "values")
        arrays = dict(zip(names, inputs))
        prepared = self._structure()
        if values is not None:
            new_values = self._coerce_values(values)
            prepared = {k: v for k, v in prepared.items() if k not in new_values}
            arrays.update(new_values)
        if out is None:
            out = self._outputs.take(self.output_shape(), self.dtype, inputs[0])
            if out is None:
                out = empty_like(inputs[0], self.output_shape(), self.dtype)
        else:
            _check_array_type(out, "out")
            check_dense(out, name="out", shape=self.output_shape(), dtype=self.dtype)
            check_no_grad(out, "out")
            for name, array in [*zip(names, inputs), *([("values", values)] if values is not None else [])]:
                if may_overlap(out, array):
                    raise ValueError(f"out shares memory with {name}; the kernel would read what it overwrites: "
                                     "pass a separate output array (or none, for a new one)")
        if self.layout is not None and self.layout.outputs:
            scratch = self._outputs_like(inputs[0])
            arrays.update(scratch)
            self.function.invoke(arrays, self.sizes, prepared)
            self.layout.gather_outputs(scratch, out)
        else:
            arrays[self.spec["outputs"][0]] = out
            self.function.invoke(arrays, self.sizes, prepared)
        return out

    def _short_call(self, inputs: tuple, out):
        """The call through the kernel's :class:`~sparsetir.runtime.call_plan.CallPlan` where every operand
        is already what the full path would pass unchanged; None (nothing run) where it is not."""
        plan = self._plan
        if plan is None:
            plan = self._plan = CallPlan.for_kernel(self) or False
            if plan is False:
                return None
        args = plan.input_arguments(inputs)
        if args is None:
            return None
        if out is None:
            shape = self.output_shape()
            out = self._outputs.take(shape, self.dtype, inputs[0]) if plan.out_bytes >= MIN_BYTES else None
            if out is None:
                out = empty_like(inputs[0], shape, self.dtype)
        elif any(may_overlap(out, array) for array in inputs):
            return None  # the full path says why
        if plan.with_output(args, out) is None:
            return None
        self.function.kernel()(*args)
        return out

    def release_outputs(self) -> None:
        """Drop the outputs kept for reuse (``runtime.output_pool``); results still held stay valid."""
        self._outputs.release()

    def _outputs_like(self, reference) -> dict:
        if self._scratch is None or any(is_torch(a) != is_torch(reference) for a in self._scratch.values()):
            self._scratch = {name: empty_like(reference, self._shape[name], self._dtype[name])
                             for name in self.spec["outputs"]}
        return self._scratch

    def _coerce_values(self, values) -> dict:
        """New non-zero values (CSR order), cast to the kernel dtype, by value parameter."""
        _check_array_type(values, "values")
        nnz = self.layout.nnz if self.layout is not None else self._shape[self.spec["values"][0]][0]
        if tuple(values.shape) != (nnz,):
            raise ValueError(f"values has shape {tuple(values.shape)}, expected ({nnz},) (one per non-zero)")
        if self.value_order is not None:
            if is_torch(values):
                import torch  # noqa: PLC0415 - torch loads only for torch inputs (the runtime runs numpy without it)

                values = values[torch.as_tensor(self.value_order, device=values.device)]
            else:
                values = values[self.value_order]
        if self.layout is not None:
            return self._on_device(self.layout.scatter_values(values, self.dtype))
        if dtype_name(values) != self.dtype:
            if is_torch(values):
                import torch  # noqa: PLC0415 - torch loads only for torch inputs (the runtime runs numpy without it)

                values = values.to(getattr(torch, self.dtype))
            else:
                values = values.astype(numpy_dtype(self.dtype))
        return {self.spec["values"][0]: values}

    def _sidecar_arrays(self) -> dict:
        arrays = super()._sidecar_arrays()
        if self.layout is not None:
            arrays.update(self.layout.arrays())
        if self.value_order is not None:
            arrays[VALUE_ORDER] = self.value_order
        return arrays

    def _export_nnz(self) -> int | None:
        return None if self.layout is None else self.layout.nnz

    def __repr__(self) -> str:
        return f"Kernel({self.spec['op']}, {self.spec.get('format', '?')}, {self.device}, sizes={self.sizes})"


def load_kernel(path) -> Kernel:
    """Load an exported kernel (library plus sidecars); needs only the TVM runtime.

    Everything read back is checked before any kernel runs: the sha256 of the library and of the
    structure sidecar (recorded at export), then the structure itself, with the validation a
    compiled function runs on its inputs (shapes, dtypes, index ranges, monotone indptr, sorted,
    distinct and disjoint rows where the kernel relies on them) and the value layout.
    """
    function, kernel, everything = read_export(path, _check_kernel_entry)
    npz = sidecar(Path(path).absolute(), ".npz")
    sizes = kernel["sizes"]
    bound = {k: v for k, v in everything.items() if not k.startswith("__")}
    function.signature.check_structure(bound, sizes)
    layout = None if kernel["nnz"] is None else SlotLayout.from_arrays(kernel["nnz"], everything)
    if layout is not None:
        layout.validate({name: bound[name].shape if name in bound else None for name in layout.values},
                        name=str(npz))
    order = everything.get(VALUE_ORDER)
    if order is not None:
        check_permutation(order, name=f"{npz}[{VALUE_ORDER}]")
    return Kernel(function, kernel["spec"], bound, sizes, layout, order)


def _check_kernel_entry(path, kernel) -> None:
    if not isinstance(kernel, dict):
        raise ValueError(f"{path} holds a compiled function, not a bound kernel")
    missing = [key for key in ("spec", "sizes", "nnz") if key not in kernel]
    if missing:
        raise ValueError(f"{path}: the manifest's kernel entry lacks {missing}")


def _check_array_type(array, name: str) -> None:
    if not (isinstance(array, np.ndarray) or is_torch(array)):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(array).__name__}")
