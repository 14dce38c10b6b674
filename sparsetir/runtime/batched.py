"""A kernel bound to one structure whose dense operands are ``(batch, heads, rows, dim)``.

Block-sparse attention (``ops.sparse_attention``) compiles one structure (a mask over
``rows x rows``) and runs it on any batch: the compiled function takes each operand as
``(g, rows', dim)``, where ``g`` (a size parameter) is ``batch * heads`` for a mask shared by all
heads and ``batch`` for a mask per head (then ``rows' = heads * rows``: the heads are stacked).
Both are views of a contiguous ``(batch, heads, rows, dim)`` array, so operands pass without a
copy. When the mask was compiled for more rows than the operands have (a sequence that its
block does not divide), the operands are copied into zero-padded arrays and the result back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .block_layout import check_block_layout
from .bound import BoundKernel, empty_like, read_export
from .function import CompiledFunction, sidecar
from .marshal import check_no_grad, is_torch, may_overlap
from .validate import dtype_name

BATCHED = "batched"  # the spec key marking a BatchedKernel export
LAYOUT = "__layout"  # the sidecar array holding the block layout the structure was built from


class BatchedKernel(BoundKernel):
    """Call as ``kernel(*inputs, out=None)`` with ``(batch, heads, rows, dim)`` operands.

    ``spec``: ``op``, ``inputs``/``outputs`` (parameter names), ``dtype``, and under ``batched``:
    ``size`` (the batch size parameter), ``heads`` (a stacked mask's heads, or None), ``rows``
    (per input and output: the rows the operand has, and the padded rows the kernel reads) and
    ``dim``. ``source``, ``device``, ``dtype``, the prepared structure and ``export`` are the shared
    :class:`~sparsetir.runtime.bound.BoundKernel`'s.
    """

    def __init__(self, function: CompiledFunction, spec: dict, bound: dict, sizes: dict, layout=None):
        super().__init__(function, spec, bound, sizes)
        # the block layout (checked by the one layout validator), kept for export
        self.layout = None if layout is None else check_layout_for(spec, check_block_layout(layout), "layout")
        self.batched = spec[BATCHED]
        self.timings: dict = {}

    @property
    def heads(self) -> int | None:
        """The heads of a mask per head (the operands must have that many); None for a shared mask."""
        return self.batched["heads"]

    def output_shape(self, *inputs) -> tuple:
        """The output's shape for these operands: the first's, with the output's rows."""
        batch, heads = inputs[0].shape[:2]
        rows, _ = self.batched["rows"][self.spec["outputs"][0]]
        return (int(batch), int(heads), rows, self.batched["dim"])

    # -- calls -------------------------------------------------------------------------------
    def __call__(self, *inputs, out=None):
        names = self.spec["inputs"]
        if len(inputs) != len(names):
            raise TypeError(f"{self.spec['op']} kernel takes {len(names)} operand(s) {names}, got {len(inputs)}")
        if self.device == "cuda":
            self.function.kernel()  # a clear RuntimeError where no GPU is present
        first = inputs[0]
        for name, array in zip(names, inputs):
            self._check_operand(name, array, first)
        output_name = self.spec["outputs"][0]
        shape = self.output_shape(*inputs)
        if out is None:
            out = empty_like(first, shape, self.dtype)
        else:
            self._check_operand("out", out, first, rows_of=output_name)
            check_no_grad(out, "out")
            for name, array in zip(names, inputs):
                if may_overlap(out, array):
                    raise ValueError(f"out shares memory with {name}; the kernel would read what it overwrites: "
                                     "pass a separate output array (or none, for a new one)")
        batch, heads = (int(d) for d in first.shape[:2])
        groups = batch if self.heads is not None else batch * heads
        arrays = {name: self._kernel_view(name, array, groups) for name, array in zip(names, inputs)}
        staged = self._padded(output_name, out)
        if staged is None and not _contiguous(out):
            staged = empty_like(out, tuple(out.shape), self.dtype)
        arrays[output_name] = _grouped(staged if staged is not None else out, groups)
        self.function.invoke(arrays, {**self.sizes, self.batched["size"]: groups}, self._structure())
        if staged is not None:
            out[...] = staged[:, :, :out.shape[2]]
        return out

    def _check_operand(self, name: str, array, first, *, rows_of: str | None = None) -> None:
        if not (isinstance(array, np.ndarray) or is_torch(array)):
            raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(array).__name__}")
        if type(array) is not type(first):
            raise TypeError(f"{name} is a {type(array).__name__} but {self.spec['inputs'][0]} a "
                            f"{type(first).__name__}: pass one kind")
        if dtype_name(array) != self.dtype:
            raise TypeError(f"{name} has dtype {dtype_name(array)}, but the kernel was compiled for {self.dtype}")
        if len(array.shape) != 4:
            raise ValueError(f"{name} must be (batch, heads, rows, dim), got shape {tuple(array.shape)}")
        rows, _ = self.batched["rows"][rows_of or name]
        batch, heads = first.shape[:2]
        expected = (int(batch), int(heads), rows, self.batched["dim"])
        if self.heads is not None and int(heads) != self.heads:
            raise ValueError(f"{name} has {heads} heads, but the mask has one layout per head for {self.heads}")
        if tuple(int(d) for d in array.shape) != expected:
            raise ValueError(f"{name} has shape {tuple(array.shape)}, expected {expected}")
        if int(batch) < 1 or int(heads) < 1:
            raise ValueError(f"{name} has an empty batch or no heads: shape {tuple(array.shape)}")
        check_no_grad(array, name)

    def _padded(self, name: str, array):
        """A zero-padded copy when the kernel reads more rows than ``array`` has (else None)."""
        rows, padded = self.batched["rows"][name]
        if rows == padded:
            return None
        shape = (*array.shape[:2], padded, array.shape[3])
        copy = _zeros_like(array, shape, self.dtype)
        return copy

    def _kernel_view(self, name: str, array, groups: int):
        padded = self._padded(name, array)
        if padded is not None:
            padded[:, :, :array.shape[2]] = array
            array = padded
        return _grouped(array, groups)

    def _prepare(self, bound: dict) -> dict:
        prepared = self.function.prepare(bound, {**self.sizes, self.batched["size"]: 1})
        prepared.pop(self.batched["size"], None)
        return prepared

    # -- export --------------------------------------------------------------------------------
    def _sidecar_arrays(self) -> dict:
        arrays = super()._sidecar_arrays()
        if self.layout is not None:
            arrays[LAYOUT] = self.layout
        return arrays

    @classmethod
    def load(cls, path) -> BatchedKernel:
        """An exported batched kernel, checked as ``runtime.load`` checks every export (the digests of
        the library and the structure, then the structure itself)."""
        function, kernel, bound = read_export(path, _check_batched_entry)
        npz = sidecar(Path(path).absolute(), ".npz")
        layout = bound.pop(LAYOUT, None)
        if layout is None:
            raise ValueError(f"{npz} lacks {LAYOUT} (the block layout the structure was built from)")
        layout = check_layout_for(kernel["spec"], check_block_layout(layout, name=f"{npz}[{LAYOUT}]"),
                                  f"{npz}[{LAYOUT}]")
        sizes = kernel["sizes"]
        spec = kernel["spec"]
        function.signature.check_structure(bound, {**sizes, spec[BATCHED]["size"]: 1})
        return cls(function, spec, bound, sizes, layout)

    def __repr__(self) -> str:
        return f"BatchedKernel({self.spec['op']}, {self.spec.get('format', '?')}, {self.device})"


def _check_batched_entry(path, kernel) -> None:
    if not isinstance(kernel, dict) or not isinstance(kernel.get("spec"), dict) or BATCHED not in kernel["spec"]:
        raise ValueError(f"{path} does not hold a batched kernel")


def check_layout_for(spec: dict, layout: np.ndarray, name: str) -> np.ndarray:
    """A validated block layout that fits the kernel: one layout per head for a kernel with heads, and
    ``rows / block`` blocks each way (the padded rows of the queries and of the keys)."""
    batched, block = spec[BATCHED], spec.get("block")
    heads = batched.get("heads")
    if (layout.ndim == 3) != (heads is not None) or (heads is not None and layout.shape[0] != heads):
        raise ValueError(f"{name} has shape {layout.shape}, but the kernel was compiled for "
                         f"{'one layout per head of ' + str(heads) if heads is not None else 'one shared layout'}")
    if isinstance(block, int) and not isinstance(block, bool) and block > 0:
        expected = tuple(batched["rows"][key][1] // block for key in (spec["inputs"][0], spec["inputs"][1]))
        if tuple(layout.shape[-2:]) != expected:
            raise ValueError(f"{name} has {layout.shape[-2:]} blocks, but the kernel was compiled for {expected}")
    return layout


def _grouped(array, groups: int):
    """A ``(batch, heads, rows, dim)`` array as ``(groups, rows', dim)``: a view when it is contiguous."""
    return array.reshape((groups, -1, array.shape[-1]))


def _contiguous(array) -> bool:
    return array.is_contiguous() if is_torch(array) else bool(array.flags.c_contiguous)


def _zeros_like(reference, shape, dtype):
    array = empty_like(reference, shape, dtype)
    array[...] = 0
    return array
