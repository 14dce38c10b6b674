"""``specialize``: bind symbolic sizes of a Stage III function to constants (faster code, one matrix).

Requires: a PrimFunc from ``lower_sparse_buffer``, where every symbolic size is a scalar
parameter. The bound parameters disappear from the signature, and every shape and
extent that used them becomes a constant (so LLVM can unroll and drop bounds checks).

Before::

    def spmm(A: T.Buffer((nnz,)), ..., J_indptr: T.Buffer((m + 1,)), ..., m: T.int32, n: T.int32, nnz: T.int32)

After ``specialize(func, {"m": 2708, "n": 2708, "nnz": 10556})``::

    def spmm(A: T.Buffer((10556,)), ..., J_indptr: T.Buffer((2709,)), ...)
"""

from __future__ import annotations

import ast
import json

from tvm import tirx

from ..lower import SIGNATURE_ATTR
from ..runtime.signature import evaluate


def specialize(func: tirx.PrimFunc, sizes: dict) -> tirx.PrimFunc:
    """``func`` with the named size parameters bound to the given integers."""
    if not isinstance(func, tirx.PrimFunc) or SIGNATURE_ATTR not in (func.attrs or {}):
        raise TypeError("specialize takes a Stage III PrimFunc made by lower_sparse_buffer")
    signature = json.loads(str(func.attrs[SIGNATURE_ATTR]))
    size_params = {p["name"]: p for p in signature["params"] if p["role"] == "size"}
    unknown = sorted(set(sizes) - set(size_params))
    if unknown:
        raise ValueError(f"{unknown} are not size parameters; the sizes are {sorted(size_params)}")
    values = {}
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"size {name} must be an int >= 0, got {value!r}")
        values[name] = value
    scalars = {p.name: p for p in func.params if not _is_buffer(p)}
    bound = func.specialize({scalars[name]: tirx.const(v, size_params[name]["dtype"]) for name, v in values.items()})
    buffers = {p.name: p for p in bound.params if _is_buffer(p)}
    params = []
    for param in signature["params"]:
        if param["name"] in values:
            continue
        if param["name"] in buffers:
            param = {**param, "shape": [str(dim) for dim in buffers[param["name"]].shape]}
        params.append(param)
    axes = [{key: _substitute(v, values) if key in ("length", "nnz", "nnz_cols") else v for key, v in axis.items()}
            for axis in signature["axes"]]
    signature = {**signature, "params": params, "axes": axes, "specialized": {**signature.get("specialized", {}),
                                                                             **values}}
    return bound.with_attr(SIGNATURE_ATTR, json.dumps(signature))


def _is_buffer(param) -> bool:
    return "Buffer" in type(param.ty).__name__


def _substitute(expression, values: dict):
    """A shape expression string with the bound sizes replaced (evaluated when constant)."""
    if expression is None:
        return None
    try:
        return str(evaluate(expression, values))
    except ValueError:  # other sizes stay symbolic
        tree = ast.parse(expression, mode="eval")

        class Bind(ast.NodeTransformer):
            def visit_Name(self, node):
                return ast.copy_location(ast.Constant(values[node.id]), node) if node.id in values else node

        return ast.unparse(Bind().visit(tree))
