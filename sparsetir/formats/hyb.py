"""hyb(c, buckets): column partitions, each an ELL per bucket width (the SparseTIR artifact's format).

The conversion, exactly as the SparseTIR artifact does it:

1. Split the columns into ``c`` parts of equal width: ``part(j) = j // ceil(n / c)``.
2. For each (row, part) take the degree ``d`` and put the row's entries of that part into the
   smallest bucket of width ``>= d``. A row with ``d`` above the largest width ``w`` becomes
   ``ceil(d / w)`` consecutive ELL rows of the largest bucket, all with the same row id.
3. Pad with mask 0 (column 0, value 0, ``csr_position`` -1). A bucket may be empty (0 rows);
   a (row, part) with ``d == 0`` is in no bucket.

Layout (what the kernels index): ``HybMatrix.parts[p][b]`` is a ``HybBucket`` of width
``buckets[b]`` with ``rows (R,)`` (original row ids, ascending, split pieces consecutive),
``indices``, ``values`` and ``csr_position`` of shape ``(R, width)``, and the grouped view
``unique_rows (U,)`` with ``piece_indptr (U + 1,)`` (pieces per unique row).

The conversion is vectorised: one pass over the non-zeros finds the (row, part) segments, a
stable radix sort orders the segments by (part, bucket), and three scatters fill one flat
buffer per array, which the buckets view without copying (each view 16-byte aligned).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import dense_variable, sparse_fixed
from ..runtime.validate import entry_rows
from .base import Field, Format, positive_int
from .matrix import CSRMatrix, read_sparse_input
from .registry import register_format
from .slots import PADDING, SlotArray, SlotMatrix, exclusive_cumsum, index_dtype_for
from .structure import make_rule, value_params

MAX_DEFAULT_BUCKET = 512
TUNING_COL_PARTS = (1, 2, 4, 8, 16)
TUNING_MAX_WIDTHS = (4, 16, 64, 256, 512)  # the largest bucket; the buckets are 1, 2, 4, ..., that width
TUNING_MAX_SUB_FORMATS = 48  # hyb candidates have at most this many (part, bucket) sub-kernels (compile time)
ATOMIC_WRITE = 2.0  # cost of an atomic row write, in plain row accesses (row_access_cost)
# Buckets are views of one flat buffer per array; starting each at a multiple of 16 slots keeps
# them 16-byte aligned (the alignment kernels declare, see runtime.marshal) for every dtype.
ALIGN_SLOTS = 16


@dataclass
class HybBucket:
    """One ELL of ``width`` slots per row: R rows (split rows give several consecutive ones)."""

    width: int
    rows: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    csr_position: np.ndarray
    unique_rows: np.ndarray
    piece_indptr: np.ndarray

    @property
    def has_split_rows(self) -> bool:
        """Some row id occurs in several ELL rows (so writes to it need atomics or an order)."""
        return self.rows.shape[0] > self.unique_rows.shape[0]

    @property
    def mask(self) -> np.ndarray:
        """``(R, width)``: True where the slot holds an entry of A."""
        return self.csr_position >= 0


@dataclass
class HybMatrix(SlotMatrix):
    """Host arrays of a hyb matrix: ``parts[p][b]`` is the bucket of width ``buckets[b]`` in column part p."""

    shape: tuple
    nnz: int
    col_parts: int
    buckets: tuple
    parts: list

    @property
    def part_width(self) -> int:
        """Columns per part: part p covers ``[p * part_width, min((p + 1) * part_width, n))``."""
        return -(-self.shape[1] // self.col_parts)

    def slot_arrays(self) -> dict:
        return {
            (p, b): SlotArray(bucket.rows[:, None], bucket.indices, bucket.values, bucket.csr_position)
            for p, part in enumerate(self.parts)
            for b, bucket in enumerate(part)
        }


@register_format
class Hyb(Format):
    """hyb with ``col_parts`` column parts and ELL buckets of the given widths.

    ``buckets=None``: powers of two from 1 up to the smallest one >= the largest (row, part)
    degree, capped at 512; ``resolve(A)`` makes that list explicit.
    """

    name = "hyb"
    fields = (Field("col_parts", default=1), Field("buckets", "ints", default=None, item="bucket width",
                                                            check=lambda widths: checked_buckets(widths)))
    tuning_order = 30
    padded = True
    # On the CPU hyb loses to plain CSR: 0.74-1.00x of CSR in the reference run, and 0.27-0.60x of it
    # on dblp and amazon_cs at F=64 (2 threads); its buckets pay padding and more passes over C with
    # no coalescing to gain. So the CPU search space leaves it out; "hyb" still compiles there by name.
    tuning_devices = ("cuda",)

    def resolve(self, A) -> Hyb:
        """This format with the default buckets of ``A`` filled in (unchanged when already explicit)."""
        if self.buckets is not None:
            return self
        segments = RowPartSegments.of(read_sparse_input(A, canonical=True), self.col_parts)
        return Hyb(self.col_parts, default_buckets(segments.max_degree()))

    def _build(self, canonical: CSRMatrix, values: np.ndarray, index_dtype: str) -> HybMatrix:
        c = self.col_parts
        m, n = canonical.shape
        segments = RowPartSegments.of(canonical, c)
        buckets = self.buckets if self.buckets is not None else default_buckets(segments.max_degree())
        widths = np.asarray(buckets, dtype=np.int64)
        nbuckets = widths.shape[0]

        # Bucket of each (row, part): the smallest width >= d, else pieces of the largest one.
        bucket = np.searchsorted(widths, segments.lengths, side="left")
        oversized = bucket == nbuckets
        bucket[oversized] = nbuckets - 1
        pieces = np.ones(segments.count, dtype=np.int64)
        pieces[oversized] = -(-segments.lengths[oversized] // widths[-1])

        # Order the segments by (part, bucket); a stable sort keeps rows ascending in each.
        group = segments.parts * nbuckets + bucket
        ngroups = c * nbuckets
        order = np.argsort(group.astype(np.uint16 if ngroups <= 2**16 else np.int64), kind="stable")
        sorted_pieces = pieces[order]
        sorted_rows = segments.rows[order]
        group_widths = np.tile(widths, c)
        segments_per_group = np.bincount(group, minlength=ngroups)
        rows_per_group = np.bincount(group, weights=pieces, minlength=ngroups).astype(np.int64)
        segment_offset = exclusive_cumsum(segments_per_group)
        row_offset = exclusive_cumsum(rows_per_group)
        slots_per_group = rows_per_group * group_widths
        slot_offset = exclusive_cumsum(-(-slots_per_group // ALIGN_SLOTS) * ALIGN_SLOTS)
        total_rows, total_slots = int(row_offset[-1]), int(slot_offset[-1])
        idtype = index_dtype_for(index_dtype, m + 1, n, canonical.nnz, total_rows + 1, total_slots)

        # Where each segment's first slot lands in the flat buffers, then every entry's slot.
        piece_start = exclusive_cumsum(sorted_pieces)
        sorted_group = group[order]
        first_slot = np.empty(segments.count, dtype=np.int64)
        row_in_group = piece_start[:-1] - row_offset[sorted_group]
        first_slot[order] = slot_offset[sorted_group] + row_in_group * group_widths[sorted_group]
        destination = np.repeat(first_slot - segments.starts, segments.lengths)
        destination += np.arange(canonical.nnz, dtype=np.int64)

        flat_indices = np.zeros(total_slots, dtype=idtype)
        flat_values = np.zeros(total_slots, dtype=values.dtype)
        flat_position = np.full(total_slots, PADDING, dtype=np.int64)
        flat_indices[destination] = canonical.indices
        flat_values[destination] = values
        flat_position[destination] = np.arange(canonical.nnz, dtype=np.int64)
        ell_rows = np.repeat(sorted_rows, sorted_pieces).astype(idtype)
        unique_rows = sorted_rows.astype(idtype)
        piece_start = piece_start.astype(idtype)

        parts = []
        for p in range(c):
            part = []
            for b in range(nbuckets):
                g = p * nbuckets + b
                width = int(widths[b])
                slots = slice(slot_offset[g], slot_offset[g] + slots_per_group[g])
                first, last = segment_offset[g], segment_offset[g + 1]
                part.append(HybBucket(
                    width,
                    ell_rows[row_offset[g]:row_offset[g + 1]].copy(),
                    flat_indices[slots].reshape(-1, width),
                    flat_values[slots].reshape(-1, width),
                    flat_position[slots].reshape(-1, width),
                    unique_rows[first:last].copy(),
                    piece_start[first:last + 1] - piece_start[first],
                ))
            parts.append(part)
        return HybMatrix((m, n), canonical.nnz, c, tuple(buckets), parts)

    def rows_disjoint(self) -> bool:
        """With one column part every row lives in one bucket (its pieces in one CPU thread)."""
        return self.col_parts == 1

    # -- Stage I structure: one ELL per (column part, bucket) ----------------------------------
    def rewrite_rules(self, source, device: str) -> list:
        """Per (part p, bucket b): rows ``I_p{p}b{b} = sparse_fixed(None, m, R)`` (original row ids)
        and ``J_p{p}b{b} = sparse_fixed(rows, n, width)``.

        On the CPU, rows are distinct per bucket, so buckets write disjoint rows in parallel; the
        largest bucket, where long rows are split, iterates ``unique rows -> pieces -> slots`` so
        the pieces of one row stay in one thread. With one column part every row is in exactly
        one bucket (empty rows in a bucket of width 0), so each bucket initialises its own rows
        and no pass zeroes the output first. On CUDA the pieces are flat ELL rows and writes
        that may collide (split rows, or several column parts in one launch) are atomic.
        """
        rows, cols = source.rows, source.cols
        _, col_parts, buckets = self.structure_key()
        owns_rows = device == "cpu" and col_parts == 1
        rules = []
        for suffix, key in self.slot_keys(device):
            width = 0 if key is None else buckets[key[1]]
            last = key is not None and key[1] == len(buckets) - 1
            ell_rows = source.size(f"rows_{suffix}")
            if device == "cpu" and last:
                row_ids = sparse_fixed(f"I_{suffix}", None, rows.length, source.size(f"uniq_{suffix}"),
                                       idtype=source.idtype, distinct=True)
                pieces = dense_variable(f"P_{suffix}", row_ids, ell_rows, ell_rows)
                slots = sparse_fixed(f"J_{suffix}", pieces, cols.length, width)
                loops, roles = (row_ids, pieces, slots), "rcc"
            else:
                row_ids = sparse_fixed(f"I_{suffix}", None, rows.length, ell_rows, idtype=source.idtype,
                                       distinct=device == "cpu")
                slots = sparse_fixed(f"J_{suffix}", row_ids, cols.length, width)
                loops, roles = (row_ids, slots), "rc"
            atomic = device == "cuda" and (col_parts > 1 or last)
            rules.append(make_rule(source, suffix, loops, roles, lambda v, r=row_ids, s=slots: {rows: v[r], cols: v[s]},
                                   atomic=atomic, owns_rows=owns_rows, padded=True))
        return rules

    def slot_keys(self, device: str = "cpu") -> list:
        """(rule suffix, key of its value array in ``slot_arrays()``); the bucket of empty rows has no
        values (key None) and exists where buckets initialise their own rows (CPU, one column part)."""
        _, col_parts, buckets = self.structure_key()
        keys = [(f"p{p}b{b}", (p, b)) for p in range(col_parts) for b in range(len(buckets))]
        if device == "cpu" and col_parts == 1:
            keys.append(("p0e", None))
        return keys

    def bind(self, matrix: HybMatrix, value_buffers, device: str = "cpu") -> dict:
        params = {}
        last = len(matrix.buckets) - 1
        for suffix, key in self.slot_keys(device):
            if key is None:
                params[f"I_{suffix}_indices"] = empty_rows(matrix)
                params[f"J_{suffix}_indices"] = np.zeros(0, dtype=params[f"I_{suffix}_indices"].dtype)
                params.update(value_params(value_buffers, suffix, np.zeros(0, dtype=matrix_dtype(matrix))))
                continue
            part, b = key
            bucket = matrix.parts[part][b]
            if device == "cpu" and b == last:
                params[f"I_{suffix}_indices"] = bucket.unique_rows
                params[f"P_{suffix}_indptr"] = bucket.piece_indptr
            else:
                params[f"I_{suffix}_indices"] = bucket.rows
            params[f"J_{suffix}_indices"] = bucket.indices.reshape(-1)
            params.update(value_params(value_buffers, suffix, bucket.values.reshape(-1)))
        return params

    def sizes(self, matrix: HybMatrix) -> dict:
        sizes = {"m": matrix.shape[0], "n": matrix.shape[1], "rows_p0e": int(empty_rows(matrix).shape[0])}
        for suffix, key in self.slot_keys():
            if key is None:  # the bucket of empty rows, counted above
                continue
            bucket = matrix.parts[key[0]][key[1]]
            sizes[f"rows_{suffix}"] = int(bucket.rows.shape[0])
            sizes[f"uniq_{suffix}"] = int(bucket.unique_rows.shape[0])
        return sizes

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        """Column parts ``TUNING_COL_PARTS`` x buckets ``1, 2, 4, ...`` up to each width of
        ``TUNING_MAX_WIDTHS`` (and the maximum degree's power of two), at most
        ``TUNING_MAX_SUB_FORMATS`` sub-kernels each."""
        degrees = np.diff(np.asarray(matrix.indptr, dtype=np.int64))
        top = min(1 << max(0, int(degrees.max(initial=0)) - 1).bit_length(), MAX_DEFAULT_BUCKET)
        max_widths = sorted({w for w in TUNING_MAX_WIDTHS if w <= top} | {top})
        choices = []
        for parts in TUNING_COL_PARTS:
            if parts > max(matrix.shape[1], 1):
                continue
            for width in max_widths:
                buckets = [1 << k for k in range(width.bit_length()) if 1 << k <= width]
                if parts * len(buckets) <= TUNING_MAX_SUB_FORMATS:
                    choices.append(f"hyb:{parts}:{','.join(map(str, buckets))}")
        return choices

    def row_access_cost(self, matrix) -> float:
        """Row accesses on ``matrix`` (a canonical CSRMatrix): padded slots read plus ELL rows
        written, atomic writes weighted by ``ATOMIC_WRITE``.

        A (row, column part) segment of degree ``d`` reads the smallest bucket width ``>= d``
        slots and writes once; past the largest width ``w`` it becomes ``ceil(d / w)`` ELL rows
        of ``w`` slots, each written with an atomic. With more than one column part every write
        is atomic.
        """
        fmt = self.resolve(matrix)
        widths = np.asarray(fmt.buckets, dtype=np.int64)
        degrees = RowPartSegments.of(matrix, fmt.col_parts).lengths
        largest = widths[-1]
        fits = degrees <= largest
        pieces = -(-degrees // largest)
        slots = np.where(fits, widths[np.minimum(np.searchsorted(widths, degrees), len(widths) - 1)], pieces * largest)
        atomic_pieces = pieces.sum() if fmt.col_parts > 1 else pieces[~fits].sum()
        writes = pieces.sum() - atomic_pieces + ATOMIC_WRITE * atomic_pieces
        return float(slots.sum() + writes)

    def cost_group(self):
        """Short lists take the best setting of each column-part count first."""
        return self.col_parts



@dataclass
class RowPartSegments:
    """The non-empty (row, part) pairs of a canonical CSR matrix, in CSR order: consecutive runs of entries."""

    starts: np.ndarray  # first entry of each segment (int64)
    lengths: np.ndarray  # its degree d (int64)
    rows: np.ndarray
    parts: np.ndarray

    @property
    def count(self) -> int:
        return self.starts.shape[0]

    def max_degree(self) -> int:
        return int(self.lengths.max(initial=0))

    @classmethod
    def of(cls, canonical: CSRMatrix, col_parts: int) -> RowPartSegments:
        indptr = canonical.indptr.astype(np.int64, copy=False)
        nnz = canonical.nnz
        if col_parts == 1 or nnz == 0:
            degree = np.diff(indptr)
            rows = np.flatnonzero(degree)
            return cls(indptr[rows], degree[rows], rows, np.zeros(rows.shape[0], dtype=np.int64))
        part_width = -(-canonical.shape[1] // col_parts)
        key = entry_rows(indptr) * col_parts + canonical.indices // part_width
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        lengths = np.diff(np.append(starts, nnz))
        rows, parts = np.divmod(key[starts], col_parts)
        return cls(starts, lengths, rows, parts)



def empty_rows(matrix: HybMatrix) -> np.ndarray:
    """Rows with no entry in any bucket, ascending."""
    filled = np.zeros(matrix.shape[0], dtype=bool)
    for part in matrix.parts:
        for bucket in part:
            filled[bucket.unique_rows] = True
    dtype = matrix.parts[0][0].rows.dtype if matrix.parts and matrix.parts[0] else np.int32
    return np.flatnonzero(~filled).astype(dtype)


def matrix_dtype(matrix: HybMatrix):
    return matrix.parts[0][0].values.dtype if matrix.parts and matrix.parts[0] else np.float32


def checked_buckets(buckets) -> tuple:
    """A non-empty, strictly increasing tuple of widths >= 1; a ValueError saying what is wrong."""
    if isinstance(buckets, (str, bytes)) or not hasattr(buckets, "__iter__"):
        raise ValueError(f"Hyb: buckets must be a list of integer widths, got {buckets!r}")
    widths = tuple(positive_int(w, owner="Hyb", name="bucket width") for w in buckets)
    if not widths:
        raise ValueError("Hyb: the bucket list is empty; give at least one width (e.g. [1, 2, 4])")
    if any(a >= b for a, b in zip(widths, widths[1:])):
        raise ValueError(f"Hyb: bucket widths must be strictly increasing, got {list(widths)}")
    return widths


def default_buckets(max_degree: int) -> tuple:
    """1, 2, 4, ... up to the smallest power of two >= ``max_degree``, capped at 512."""
    top = min(max(int(max_degree), 1), MAX_DEFAULT_BUCKET)
    return tuple(1 << i for i in range((top - 1).bit_length() + 1))
