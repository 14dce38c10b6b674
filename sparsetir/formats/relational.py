"""Relational inputs (R matrices of one shape, one per relation) and what relational formats share.

A relational graph's relation ``r`` is an ``m x n`` matrix ``A_r`` with ``A_r[i, j] != 0`` iff there
is an edge ``j -> i`` of relation ``r`` (rows are targets, as PyG's ``edge_index[1]``).
:func:`read_relational_input` validates such an input once and keeps it *relation-major*: the
relations' canonical CSR matrices one after the other, which is also the order ``values=``
arrays follow. A relational format (``relcsr``, ``csf``, ...) is a :class:`RelationalFormat`: it
declares the axes of its structure and the order the op iterates them; the op
(``ops.rgms``) writes its computation over those axes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..data.rdf_graph import check_triples
from ..ir import Axis
from ..runtime.validate import check_indices, check_indptr, entry_rows
from .base import Format
from .matrix import CSRMatrix, cast_values, choose_index_dtype, read_sparse_input


@dataclass
class RelationalMatrix:
    """R relations of one ``m x n`` shape, relation-major: relation ``r``'s canonical CSR rows are rows
    ``r*m .. r*m + m - 1`` of one ``(R*m) x n`` CSR (``indptr``, ``indices``, ``values``)."""

    shape: tuple
    num_relations: int
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    def relation(self, r: int) -> sp.csr_matrix:
        m, n = self.shape
        lo, hi = int(self.indptr[r * m]), int(self.indptr[(r + 1) * m])
        return sp.csr_matrix((self.values[lo:hi], self.indices[lo:hi], self.indptr[r * m:(r + 1) * m + 1] - lo),
                             shape=(m, n))

    def coordinates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(relation, row, column) of every stored entry, relation-major (int64)."""
        m = self.shape[0]
        stacked_rows = entry_rows(self.indptr)
        return stacked_rows // max(m, 1), stacked_rows % max(m, 1), np.asarray(self.indices, dtype=np.int64)

    def with_values(self, dtype: str) -> RelationalMatrix:
        return RelationalMatrix(self.shape, self.num_relations, self.indptr, self.indices,
                                cast_values(self.values, dtype))


def read_relational_input(adj) -> RelationalMatrix:
    """A validated relation-major input from a ``RelationalGraph`` (``sparsetir.data.load_relational``:
    values 1, duplicates collapse), a list of R scipy/torch sparse matrices of one shape (duplicates
    summed), or a ``RelationalMatrix``."""
    if isinstance(adj, RelationalMatrix):
        return adj
    if hasattr(adj, "predicates") and hasattr(adj, "num_entities"):  # a RelationalGraph
        return _from_triples(adj)
    single = sp.issparse(adj) or type(adj).__module__.startswith("torch")
    if single or isinstance(adj, (str, bytes)) or not hasattr(adj, "__len__") or not len(adj):
        raise TypeError("adj must be a relational graph (sparsetir.data.load_relational) or a non-empty list of "
                        f"sparse matrices of one shape, got {type(adj).__name__}")
    matrices = [read_sparse_input(a, canonical=True) for a in adj]
    shapes = {m.shape for m in matrices}
    if len(shapes) != 1:
        raise ValueError(f"the relations' matrices must share one shape, got {sorted(shapes)}")
    (m, n), R = matrices[0].shape, len(matrices)
    counts = np.concatenate([np.diff(np.asarray(a.indptr, dtype=np.int64)) for a in matrices]) if m else \
        np.zeros(0, np.int64)
    indptr = np.zeros(R * m + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.concatenate([np.asarray(a.indices, dtype=np.int64) for a in matrices])
    values = np.concatenate([np.asarray(a.values) for a in matrices])
    return RelationalMatrix((m, n), R, indptr, indices, values)


def _from_triples(graph) -> RelationalMatrix:
    """One relation per predicate; ``A_r[object, subject] = 1`` (edges point at their targets)."""
    lengths = {np.shape(graph.subjects), np.shape(graph.predicates), np.shape(graph.objects)}
    if len(lengths) != 1:
        raise ValueError(f"RelationalGraph: subjects, predicates and objects must have one length, got {sorted(lengths)}")
    check_triples(graph)  # predicates in [0, R), entities in [0, n), naming the field (numpy's error named none)
    n = int(graph.num_entities)
    R = len(graph.relations)
    rel = np.asarray(graph.predicates, dtype=np.int64)
    rows, cols = np.asarray(graph.objects, dtype=np.int64), np.asarray(graph.subjects, dtype=np.int64)
    keys = np.unique((rel * n + rows) * n + cols)  # sorted relation-major, duplicates collapse
    stacked, cols = keys // n, keys % n
    indptr = np.zeros(R * n + 1, dtype=np.int64)
    np.cumsum(np.bincount(stacked, minlength=R * n), out=indptr[1:])
    return RelationalMatrix((n, n), R, indptr, cols, np.ones(keys.size, dtype=np.float32))


@dataclass
class RelationalAxes:
    """A relational format's structure (or one part of it): its axes in loop order, which one is
    which role, and the name of its value buffer."""

    loops: tuple  # the sparse axes, outermost first
    rows: Axis
    relations: Axis
    cols: Axis
    atomic: bool  # instances of the outer loops may write the same output rows (rows are not outermost)
    values: str = "A"  # the value buffer's name
    suffix: str = ""  # added to the iterations' and intermediates' names of this part
    padded: bool = False  # the value buffer has padding slots holding -0.0, which the op skips (ir.padding)


class RelationalFormat(Format):
    """A format of a relational input (see the module docstring). A subclass provides

    ``structure(idtype, device) -> RelationalAxes`` or a list of them
        The axes the op iterates; a list for a format in several parts (``ell3d``'s buckets),
        each with its own value buffer, which the op iterates one after the other.
    ``build(matrix, index_dtype) -> (arrays, sizes, placement)``
        Host arrays by parameter name and the size variables. ``placement`` says where each
        relation-major input entry is stored: ``None`` (in input order), an array
        ``value_order`` (position ``p`` of the one value buffer holds input entry
        ``value_order[p]``), or a ``runtime.slot_layout.SlotLayout`` (several padded buffers).
    ``rows_outermost``
        Whether rows are the outer loop (the op then writes rows in parallel without atomics).
    """

    input = "relational"
    rows_outermost = True

    def convert(self, A, *, dtype: str = "float32", index_dtype: str = "int32"):
        return self.build(read_relational_input(A).with_values(dtype), index_dtype)

    def structure(self, idtype: str, device: str) -> RelationalAxes:
        raise NotImplementedError(f"{type(self).__name__} does not implement structure")

    def build(self, matrix: RelationalMatrix, index_dtype: str):
        raise NotImplementedError(f"{type(self).__name__} does not implement build")

    @staticmethod
    def index_dtype(matrix: RelationalMatrix, requested: str | None) -> str:
        m, n = matrix.shape
        return choose_index_dtype(matrix.num_relations * m + 1, n + 1, matrix.nnz + 1, requested=requested)


def check_relational(matrix: RelationalMatrix) -> None:
    """The relation-major arrays are a valid stacked CSR (monotone indptr, indices in range)."""
    m, n = matrix.shape
    check_indptr(matrix.indptr, name="relational indptr", rows=matrix.num_relations * m, nnz=matrix.nnz)
    check_indices(matrix.indices, name="relational indices", length=n)


def as_csr(matrix: RelationalMatrix) -> CSRMatrix:
    """The relation-major stacking as one ``(R*m) x n`` CSRMatrix."""
    m, n = matrix.shape
    return CSRMatrix((matrix.num_relations * m, n), matrix.indptr, matrix.indices, matrix.values)
