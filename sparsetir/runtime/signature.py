"""The calling convention of a compiled function, and the checks run before every generic call.

The signature is JSON written by ``lower_sparse_buffer``: the parameters (value
buffers, axis metadata, symbolic sizes) and the axis tree, with shapes as
expression strings over the size names.
"""

from __future__ import annotations

import ast
import functools
import json
import operator

import numpy as np

from .validate import (
    check_coordinates,
    check_dense,
    check_disjoint_rows,
    check_distinct_rows,
    check_indices,
    check_indptr,
    check_sorted_rows,
)

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}


def evaluate(expression: str, sizes: dict) -> int:
    """Value of a shape expression such as ``"m + 1"`` or ``"nnz"`` given the sizes."""
    return _parsed(expression)(sizes)


def evaluate_check(expression: str) -> str | None:
    """Why ``expression`` is no shape expression :func:`evaluate` can read (None when it is one)."""
    if len(expression) > 200:
        return f"is a shape expression of {len(expression)} characters"
    try:
        _parsed(expression)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return f"is not a shape expression (sizes, integers, +, -, *, //): {expression!r}"
    return None


@functools.cache
def _parsed(expression: str):
    """``expression`` parsed once into a function of the sizes (a kernel call evaluates a few each time)."""
    tree = ast.parse(expression.replace("//", " // "), mode="eval").body

    def build(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            value = node.value
            return lambda sizes: value
        if isinstance(node, ast.Name):
            name = node.id

            def size(sizes):
                if name not in sizes:
                    raise ValueError(f"size {name!r} is unknown; pass it explicitly")
                return int(sizes[name])

            return size
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            combine, left, right = _BINARY[type(node.op)], build(node.left), build(node.right)
            return lambda sizes: combine(left(sizes), right(sizes))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("int32", "int64") and node.args:
            return build(node.args[0])  # T.int64(5)
        raise ValueError(f"unsupported shape expression {expression!r}")

    return build(tree)


class Signature:
    def __init__(self, data):
        data = json.loads(data) if isinstance(data, str) else data
        self.data = data
        self.params: list[dict] = data["params"]
        self.axes: list[dict] = data["axes"]
        self.outputs: list[str] = data["outputs"]
        self.names = [p["name"] for p in self.params]

    def bind(self, args, kwargs) -> dict:
        """Map positional and keyword arguments to parameter names."""
        if len(args) > len(self.params):
            raise TypeError(f"expected at most {len(self.params)} arguments {self.names}, got {len(args)}")
        bound = dict(zip(self.names, args))
        for name, value in kwargs.items():
            if name not in self.names:
                raise TypeError(f"unexpected argument {name!r}; parameters are {self.names}")
            if name in bound:
                raise TypeError(f"argument {name!r} given twice")
            bound[name] = value
        return bound

    def infer_sizes(self, bound: dict) -> dict:
        """Sizes given explicitly, else read off array shapes whose dimension is ``name`` or ``name + c``."""
        sizes = {p["name"]: int(bound[p["name"]]) for p in self.params if p["role"] == "size" and p["name"] in bound}
        # the structure (indptr, indices) says what the sizes are, then the inputs; outputs last, so a wrong
        # output is reported as the output's shape, not as its neighbour's
        rank = {"indptr": 0, "indices": 0}
        ordered = sorted(self.params, key=lambda p: (rank.get(p["role"], 1) if p["name"] not in self.outputs else 2))
        for param in ordered:
            array = bound.get(param["name"])
            if param["role"] == "size" or array is None or not hasattr(array, "shape"):
                continue
            for expression, dim in zip(param["shape"], array.shape):
                name, _, offset = expression.partition(" + ")
                if name.isidentifier() and name not in sizes and (not offset or offset.isdigit()):
                    sizes[name] = int(dim) - int(offset or 0)
        return sizes

    def check(self, bound: dict, sizes: dict) -> None:
        """Shapes and dtypes of every array, and the validity of every axis' metadata."""
        missing = [p["name"] for p in self.params if p["name"] not in bound and p["role"] != "size"]
        if missing:
            raise TypeError(f"missing arguments {missing}")
        rank = {"indptr": 0, "indices": 0}
        for param in sorted(self.params, key=lambda p: (rank.get(p["role"], 1) if p["name"] not in self.outputs
                                                        else 2)):
            if param["role"] == "size":
                continue
            shape = tuple(evaluate(e, sizes) for e in param["shape"])
            check_dense(bound[param["name"]], name=param["name"], shape=shape, dtype=param["dtype"])
            self.check_coordinates(param, bound[param["name"]], sizes)
        for axis in self.axes:
            self._check_axis(axis, bound, sizes)

    def check_structure(self, bound: dict, sizes: dict) -> None:
        """Arrays fixed at export (a kernel's structure and values) before any call uses them: each
        has its parameter's shape and dtype, every size is given, and the metadata of every axis
        they hold passes the checks of :meth:`check` (so a tampered sidecar is refused, not run)."""
        unknown = sorted(set(bound) - set(self.names))
        if unknown:
            raise ValueError(f"arrays {unknown} are not parameters of the kernel")
        missing = [p["name"] for p in self.params if p["role"] == "size" and p["name"] not in sizes]
        if missing:
            raise ValueError(f"sizes {missing} are missing")
        for param in self.params:
            if param["role"] == "size" or param["name"] not in bound:
                continue
            array = bound[param["name"]]
            if not isinstance(array, np.ndarray) and not hasattr(array, "shape"):
                raise TypeError(f"{param['name']} must be an array, got {type(array).__name__}")
            shape = tuple(evaluate(e, sizes) for e in param["shape"])
            check_dense(array, name=param["name"], shape=shape, dtype=param["dtype"])
            self.check_coordinates(param, array, sizes)
        for axis in self.axes:
            if all(meta is None or meta in bound for meta in (axis["indptr"], axis["indices"])):
                self._check_axis(axis, bound, sizes)

    @staticmethod
    def check_coordinates(param: dict, array, sizes: dict) -> None:
        """An integer buffer the kernel uses as coordinates (``coordinates_of``) holds only valid ones."""
        for use in param.get("coordinates_of", ()):
            check_coordinates(_host(array), name=param["name"], length=evaluate(use["length"], sizes),
                              axis=use["axis"])

    def _check_axis(self, axis: dict, bound: dict, sizes: dict) -> None:
        if axis["indptr"] is None and axis["indices"] is None:
            return
        indptr = _host(bound[axis["indptr"]]) if axis["indptr"] else None
        indices = _host(bound[axis["indices"]]) if axis["indices"] else None
        if indptr is not None:
            rows = indptr.shape[0] - 1
            nnz = indices.shape[0] if indices is not None else evaluate(axis["nnz"], sizes)
            check_indptr(indptr, name=axis["indptr"], rows=rows, nnz=nnz)
        if indices is not None:
            length = evaluate(axis["length"], sizes)
            check_indices(indices, name=axis["indices"], length=length)
            if indptr is None:  # fixed count per parent position (all of them for a root axis)
                width = evaluate(axis["nnz_cols"], sizes)
                indptr = np.arange(0, indices.shape[0] + 1, max(width, 1), dtype=np.int64)
            if axis["sorted"]:
                check_sorted_rows(indptr, indices, name=axis["indices"])
            if axis.get("distinct"):
                check_distinct_rows(indptr, indices, length, name=axis["indices"])
            if axis.get("disjoint"):
                check_disjoint_rows(indptr, indices, name=axis["indices"])


def _host(array) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array
    return array.detach().cpu().numpy()
