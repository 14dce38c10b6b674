"""Where a decomposed kernel keeps each non-zero of A, so values and results cross in CSR order.

A format splits A's non-zeros over several value arrays (ELL part and remainder, hyb
buckets, blocks), with padding. For each such kernel parameter this keeps the CSR
position of every slot (-1 for padding), shaped like the parameter. A floating padding slot
holds -0.0 and a stored zero +0.0 (:func:`mark_padding`): the kernels skip a slot holding -0.0
(``sparsetir.ir.padding``), so a NaN in the dense operand never reaches a row through padding.
"""

from __future__ import annotations

import numpy as np

from .marshal import is_torch
from .validate import numpy_dtype

VALUES_PREFIX = "__values__"
OUTPUTS_PREFIX = "__outputs__"


def mark_padding(values: np.ndarray, position: np.ndarray) -> np.ndarray:
    """In place: -0.0 in the padding slots (``position < 0``) of a floating ``values``, and +0.0 for a
    stored -0.0 (an output-invisible change: see ``sparsetir.ir.padding``); other dtypes unchanged."""
    if values.dtype.kind != "f" and values.dtype.name != "bfloat16":
        return values
    values[values == 0] = 0
    values[np.broadcast_to(position, values.shape) < 0] = -0.0
    return values


class SlotLayout:
    """``values``/``outputs``: parameter name -> CSR position of each slot (same shape)."""

    def __init__(self, nnz: int, values: dict, outputs: dict):
        self.nnz = int(nnz)
        self.values = dict(values)
        self.outputs = dict(outputs)

    def validate(self, shapes: dict, *, name: str) -> None:
        """Read back from a file: each value array's positions have its parameter's shape, lie in
        [-1, nnz), and together hold every CSR position exactly once; outputs likewise."""
        for kind, table in (("values", self.values), ("outputs", self.outputs)):
            stored = []
            for param, position in table.items():
                if not np.issubdtype(np.asarray(position).dtype, np.integer):
                    raise ValueError(f"{name}: the {kind} layout of {param} must hold integers")
                if kind == "values" and shapes.get(param) is not None and tuple(position.shape) != tuple(shapes[param]):
                    raise ValueError(f"{name}: the {kind} layout of {param} has shape {position.shape}, "
                                     f"the parameter {tuple(shapes[param])}")
                if position.size and (position.min() < -1 or position.max() >= self.nnz):
                    raise ValueError(f"{name}: the {kind} layout of {param} holds a position outside [-1, {self.nnz})")
                stored.append(position[position >= 0])
            if table and not np.array_equal(np.sort(np.concatenate(stored)), np.arange(self.nnz)):
                raise ValueError(f"{name}: the {kind} layout does not hold every one of the {self.nnz} entries once")

    def scatter_values(self, values, dtype) -> dict:
        """CSR-ordered ``values`` spread over the value parameters (padding gets -0.0: :func:`mark_padding`)."""
        host = values if isinstance(values, np.ndarray) else values.detach().cpu().numpy()
        spread = {}
        for name, position in self.values.items():
            array = np.zeros(position.shape, dtype=numpy_dtype(dtype))
            stored = position >= 0
            array[stored] = host[position[stored]]
            spread[name] = mark_padding(array, position)
        return spread

    def gather_outputs(self, outputs: dict, out) -> None:
        """Write the per-slot results in ``outputs`` into ``out`` in CSR order."""
        for name, position in self.outputs.items():
            stored = position >= 0
            result = outputs[name]
            if is_torch(out):
                import torch  # noqa: PLC0415 - torch loads only for torch inputs (the runtime runs numpy without it)

                index = torch.as_tensor(position[stored], device=out.device)
                out[index] = result[torch.as_tensor(stored, device=result.device)]
            else:
                out[position[stored]] = result[stored]

    def arrays(self) -> dict:
        """The positions, keyed for an ``.npz`` sidecar."""
        return {**{VALUES_PREFIX + k: v for k, v in self.values.items()},
                **{OUTPUTS_PREFIX + k: v for k, v in self.outputs.items()}}

    @classmethod
    def from_arrays(cls, nnz: int, arrays: dict) -> SlotLayout | None:
        values = {k[len(VALUES_PREFIX):]: v for k, v in arrays.items() if k.startswith(VALUES_PREFIX)}
        outputs = {k[len(OUTPUTS_PREFIX):]: v for k, v in arrays.items() if k.startswith(OUTPUTS_PREFIX)}
        return cls(nnz, values, outputs) if values or outputs else None
