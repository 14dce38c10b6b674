"""Input kinds: what a format stores (``Format.input``), and how the tuner reads, ships and keys it.

An op takes one kind of sparse input (``OpSpec.input``): ``"csr"``, one matrix, or
``"relational"``, one matrix per relation (``relational.py``). Each kind registers an
:class:`InputKind` here; the tuner asks the op's kind to read a user's input, to pack it into
the arrays a compile worker receives (and unpack them there), and for its fingerprint (the
database key), so the tuner never asks which kind it has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..registry import Registry
from ..runtime.validate import check_indices, check_indptr
from .matrix import read_sparse_input
from .relational import RelationalMatrix, check_relational, read_relational_input


@dataclass(frozen=True)
class InputKind:
    """One kind of sparse input.

    ``read(A)``: the validated, canonical input (its ``values`` keep their dtype); ``cast(matrix,
    dtype)``: it with values in ``dtype``, as the tuner's cases, references and compile calls
    receive it. ``pack(matrix) -> {name: array}`` and
    ``unpack(arrays)``: the round trip through a compile worker's request file (``unpack``
    validates, as for anything read back). ``fingerprint(matrix) -> dict``: the structure
    summary two inputs share when one tuned configuration should serve both.
    """

    name: str
    read: Callable
    cast: Callable
    pack: Callable
    unpack: Callable
    fingerprint: Callable


_KINDS: Registry[InputKind] = Registry("input kind")


def register_input_kind(kind: InputKind) -> InputKind:
    return _KINDS.register(kind.name, kind)


def input_kind(name: str) -> InputKind:
    return _KINDS.get(name)


def degree_histogram(indptr) -> list[int]:
    """Rows per bin ``ceil(log2(degree + 1))``: bin 0 empty rows, bin 1 degree 1, bin 2 degrees 2-3, ..."""
    degrees = np.diff(np.asarray(indptr, dtype=np.int64))
    if degrees.size == 0:
        return []
    bins = np.zeros(degrees.shape, dtype=np.int64)
    positive = degrees > 0
    bins[positive] = np.floor(np.log2(degrees[positive])).astype(np.int64) + 1
    return [int(count) for count in np.bincount(bins)]


def _cast_csr(matrix, dtype: str) -> sp.csr_matrix:
    return sp.csr_matrix((matrix.values.astype(dtype), matrix.indices, matrix.indptr), shape=matrix.shape)


def _unpack_csr(arrays) -> sp.csr_matrix:
    m, n = (int(s) for s in arrays["shape"])
    check_indptr(arrays["indptr"], name="request indptr", rows=m, nnz=arrays["indices"].shape[0])
    check_indices(arrays["indices"], name="request indices", length=n)
    return sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=(m, n))


def csr_fingerprint(matrix) -> dict:
    """``{"shape", "nnz", "degree_histogram"}`` of a CSR input."""
    m, n = matrix.shape
    return {"shape": [int(m), int(n)], "nnz": int(matrix.nnz), "degree_histogram": degree_histogram(matrix.indptr)}


def _unpack_relational(arrays) -> RelationalMatrix:
    m, n, relations = (int(s) for s in arrays["shape"])
    matrix = RelationalMatrix((m, n), relations, arrays["indptr"], arrays["indices"], arrays["data"])
    check_relational(matrix)
    return matrix


def relational_fingerprint(matrix: RelationalMatrix) -> dict:
    """The CSR fingerprint of the relation-major stacking, plus the relations and their entry counts."""
    m, n = matrix.shape
    relation_nnz = np.diff(np.asarray(matrix.indptr, dtype=np.int64)[::max(m, 1)]) if m else \
        np.zeros(matrix.num_relations, np.int64)
    return {"shape": [int(m), int(n)], "relations": int(matrix.num_relations), "nnz": int(matrix.nnz),
            "relation_nnz": [int(c) for c in relation_nnz], "degree_histogram": degree_histogram(matrix.indptr)}


CSR_INPUT = register_input_kind(InputKind(
    "csr", read=lambda A: read_sparse_input(A, canonical=True), cast=_cast_csr,
    pack=lambda A: {"indptr": A.indptr, "indices": A.indices, "data": A.data, "shape": np.asarray(A.shape)},
    unpack=_unpack_csr, fingerprint=csr_fingerprint))

RELATIONAL_INPUT = register_input_kind(InputKind(
    "relational", read=read_relational_input, cast=lambda M, dtype: M.with_values(dtype),
    pack=lambda M: {"indptr": M.indptr, "indices": M.indices, "data": M.values,
                    "shape": np.asarray((*M.shape, M.num_relations))},
    unpack=_unpack_relational, fingerprint=relational_fingerprint))
