"""The tuning problem a compile worker reads: the input's arrays (packed by its kind), op, feature
sizes, dtype and target, in one npz."""

from __future__ import annotations

import json

import numpy as np

from ..formats.inputs import input_kind
from ..ops import get_op

_PROBLEM = "problem"


def write_request(path, op: str, matrix, feats: tuple, dtype: str, target: dict) -> None:
    arrays = input_kind(get_op(op).input).pack(matrix)
    problem = {"op": op, "feats": [int(f) for f in feats], "dtype": dtype, "target": target}
    np.savez(path, **arrays, **{_PROBLEM: np.asarray(json.dumps(problem))})


def read_request(path):
    """``(problem, matrix)``; the arrays are validated by the input kind as they are unpacked."""
    with np.load(path, allow_pickle=False) as stored:
        problem = json.loads(str(stored[_PROBLEM]))
        arrays = {name: stored[name] for name in stored.files if name != _PROBLEM}
    return problem, input_kind(get_op(problem["op"]).input).unpack(arrays)
