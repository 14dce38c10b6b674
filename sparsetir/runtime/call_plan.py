"""A kernel call's short path: operands that need no conversion go straight into a prepared argument list.

:class:`~sparsetir.runtime.kernel.Kernel` checks and marshals every operand on every call
(``check_dense``, ``check_no_grad``, the devices, ``kernel_argument``), then ``invoke`` builds the
argument list by name: some 25 us of Python a call, more than an empty structure's kernel takes.
A :class:`CallPlan` is built once per kernel: the argument list with the structure and the sizes
already in place, and for each operand its slot and what it must be. A call whose every operand
*already is* what the full checks would accept unchanged (the exact numpy or torch type, the
shape, the dtype, on the kernel's device, C-contiguous and aligned, not empty, no tensor that
requires grad) fills the slots and calls the kernel; any other call (a mismatch, a copy to make,
an error to raise) returns None from :meth:`CallPlan.arguments` and the caller takes the full path,
which raises or converts as before. So the short path only ever accepts what the full one
accepts, and passes it as the full one would (zero-copy).

A kernel with a slot layout's outputs, coordinate inputs, or bfloat16 operands has no plan (the
full path handles them).
"""

from __future__ import annotations

import sys

import numpy as np

from .marshal import ALIGNMENT, _import_numpy
from .validate import numpy_dtype

__all__ = ["CallPlan"]


class CallPlan:
    """The prepared argument list of one kernel and its operands' slots and expectations.

    ``params``: the compiled function's parameters; ``prepared``: its fixed arguments by name (the
    structure, converted; the sizes); ``operands``: ``(name, shape, dtype)`` of the inputs in call
    order, then the output; ``device``: the kernel's (``"cpu"`` or ``"cuda"``)."""

    def __init__(self, params: list[dict], prepared: dict, sizes: dict, operands: list[tuple], device: str):
        self.template = []
        slots = {}
        for index, param in enumerate(params):
            name = param["name"]
            if name in prepared:
                self.template.append(prepared[name])
            elif param["role"] == "size":
                self.template.append(int(sizes[name]))
            else:
                slots[name] = index
                self.template.append(None)
        self.slots = [slots[name] for name, _, _ in operands]
        self.shapes = [tuple(shape) for _, shape, _ in operands]
        self.numpy_dtypes = [numpy_dtype(dtype) for _, _, dtype in operands]
        self.dtype_names = [str(dtype) for _, _, dtype in operands]
        self.cuda = device == "cuda"
        self.out_bytes = int(np.prod(self.shapes[-1], dtype=np.int64)) * self.numpy_dtypes[-1].itemsize
        self._torch_dtypes = None

    @classmethod
    def for_kernel(cls, kernel) -> CallPlan | None:
        """``kernel``'s plan, or None where it has none (see the module docstring)."""
        spec = kernel.spec
        names = [*spec["inputs"], spec["outputs"][0]]
        if kernel.layout is not None and kernel.layout.outputs:
            return None
        if any(name in kernel._coordinates for name in names) or len(spec["outputs"]) != 1:
            return None
        if any(kernel._dtype[name] == "bfloat16" for name in names):
            return None
        params = kernel.function.signature.params
        if {p["name"] for p in params if p["role"] != "size"} - set(kernel._structure()) != set(names):
            return None  # a parameter neither fixed nor an operand (a value array the call must give)
        return cls(params, kernel._structure(), kernel.sizes,
                   [(name, kernel._shape[name], kernel._dtype[name]) for name in names], kernel.device)

    def _torch(self):
        if self._torch_dtypes is None:
            torch = sys.modules["torch"]
            self._torch_dtypes = (torch.Tensor, [getattr(torch, name) for name in self.dtype_names])
        return self._torch_dtypes

    def accepts(self, index: int, array, *, output: bool = False):
        """``array`` as the kernel takes it in operand ``index``'s slot, or None where the full path must
        see it (a check to fail, a conversion to make)."""
        kind = type(array)
        if kind is np.ndarray:
            if (self.cuda or array.shape != self.shapes[index] or array.dtype != self.numpy_dtypes[index]
                    or not array.size or not array.flags.c_contiguous or (output and not array.flags.writeable)):
                return None
            try:
                return _import_numpy(array)
            except (ValueError, RuntimeError):  # below the alignment: the full path copies it
                return None
        if "torch" not in sys.modules:
            return None
        tensor_type, dtypes = self._torch()
        if kind is not tensor_type or array.shape != self.shapes[index] or array.dtype is not dtypes[index]:
            return None
        if array.requires_grad or (array.is_cuda if self.cuda else array.is_cpu) is False:
            return None
        if not array.is_contiguous() or not array.numel() or array.data_ptr() % ALIGNMENT:
            return None
        return array

    def input_arguments(self, inputs: tuple) -> list | None:
        """The argument list with ``inputs`` in their slots (each as :meth:`accepts` gives it; the output's
        slot still empty), or None where one is not accepted."""
        args = self.template.copy()
        for index, array in enumerate(inputs):
            converted = self.accepts(index, array)
            if converted is None:
                return None
            args[self.slots[index]] = converted
        return args

    def with_output(self, args: list, out) -> list | None:
        """``args`` with ``out`` in the output's slot, or None where it is not accepted."""
        converted = self.accepts(len(self.slots) - 1, out, output=True)
        if converted is None:
            return None
        args[self.slots[-1]] = converted
        return args
