"""The tuning problem a compile worker reads: the matrix arrays, op, feat, dtype and target, in one npz."""

from __future__ import annotations

import json

import numpy as np
import scipy.sparse as sp


def write_request(path, op: str, matrix, feat: int, dtype: str, target: dict) -> None:
    np.savez(path, indptr=matrix.indptr, indices=matrix.indices, data=matrix.data,
             shape=np.asarray(matrix.shape, dtype=np.int64),
             problem=np.asarray(json.dumps({"op": op, "feat": feat, "dtype": dtype, "target": target})))


def read_request(path):
    with np.load(path, allow_pickle=False) as arrays:
        problem = json.loads(str(arrays["problem"]))
        matrix = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"]))
    return problem, matrix
