"""Search spaces: format parameters x schedule knobs, per op and device.

A candidate is a configuration dict that ``compile_spmm``/``compile_sddmm`` accept
as keyword arguments: ``{"format": "hyb:1:1,2,4,8", "vector_width": 8, ...}``. The
format choices come from the matrix (degrees, block fill); the knobs from the
schedule template of the device (``sparsetir.schedule``) and the ops' own knobs.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import numpy as np

from ..runtime.validate import entry_rows

HYB_COL_PARTS = (1, 2, 4, 8, 16)
HYB_MAX_WIDTHS = (4, 16, 64, 256, 512)  # the largest bucket; the buckets are 1, 2, 4, ..., that width
ELL_QUANTILES = (0.5, 0.9)  # capped ELL widths: these degree quantiles, rounded up to a power of two
BSR_BLOCKS = (4, 8, 16)
BSR_MIN_FILL = 0.25  # a block size is a candidate when its blocks are at least this full on average
MAX_HYB_WIDTH = 512
MAX_SUB_FORMATS = 48  # hyb candidates have at most this many (part, bucket) sub-kernels (compile time)

# knob -> values; the first value is the template's default
KNOB_VALUES = {
    ("spmm", "cpu"): {"vector_width": (None, 8, 4), "unroll": (16, 0, 4, 64), "prefetch": (0, 8, 16),
                      "specialize": (False, True), "horizontal_fuse": (None, True)},
    ("sddmm", "cpu"): {"reduce_lanes": (None, 4, 16), "prefetch": (16, 0, 8), "sparse_fuse": (None, True),
                       "specialize": (False, True)},
    ("spmm", "cuda"): {"rows_per_block": (4, 1, 2, 8, 16), "lanes": (32, 8, 16), "specialize": (False, True)},
    ("sddmm", "cuda"): {"threads": (128, 64, 256), "specialize": (False, True)},
}
OP_FORMATS = {"spmm": ("csr", "rcsr", "ell", "bsr", "hyb"), "sddmm": ("csr", "rcsr", "ell", "bsr", "hyb")}
RCSR_PARTS_PER_THREAD = (1, 8)  # nnz-balanced row parts: any multiple of the thread count balances alike


def _next_power_of_two(value: int) -> int:
    return 1 << max(0, int(value) - 1).bit_length()


def _powers_up_to(width: int) -> list[int]:
    return [1 << k for k in range(width.bit_length()) if 1 << k <= width]


def format_choices(matrix, op: str) -> list[str]:
    """Format strings worth trying for ``matrix`` (a validated CSR input), CSR first."""
    n = matrix.shape[1]
    degrees = np.diff(np.asarray(matrix.indptr, dtype=np.int64))
    max_degree = int(degrees.max()) if degrees.size else 0
    choices = ["csr"]
    if max_degree == 0:
        return choices
    if "rcsr" in OP_FORMATS[op]:
        from ..runtime.loader import usable_cores

        choices += [f"rcsr:{k * usable_cores()}" for k in RCSR_PARTS_PER_THREAD]
    if "ell" in OP_FORMATS[op]:
        widths = sorted({min(_next_power_of_two(int(np.ceil(np.quantile(degrees, q)))), max_degree)
                         for q in ELL_QUANTILES} - {0})
        choices += [f"ell:{w}" for w in widths]
    if "hyb" in OP_FORMATS[op]:
        top = min(_next_power_of_two(max_degree), MAX_HYB_WIDTH)
        max_widths = sorted({w for w in HYB_MAX_WIDTHS if w <= top} | {top})
        for parts in HYB_COL_PARTS:
            if parts > max(n, 1):
                continue
            choices += [f"hyb:{parts}:{','.join(map(str, _powers_up_to(w)))}" for w in max_widths
                        if parts * len(_powers_up_to(w)) <= MAX_SUB_FORMATS]
    if "bsr" in OP_FORMATS[op]:
        rows = entry_rows(matrix.indptr)
        cols = np.asarray(matrix.indices, dtype=np.int64)
        for block in BSR_BLOCKS:
            blocks = np.unique((rows // block) * (n // block + 1) + cols // block).size
            if matrix.nnz / (blocks * block * block) >= BSR_MIN_FILL:
                choices.append(f"bsr:{block}")
    return choices


@dataclass
class SearchSpace:
    """The formats and knob values of one tuning problem; candidates are dicts."""

    op: str
    device: str
    formats: list[str]
    knobs: dict[str, tuple] = field(default_factory=dict)

    def default(self) -> dict:
        return {"format": self.formats[0], **{name: values[0] for name, values in self.knobs.items()}}

    def dimensions(self) -> dict[str, tuple]:
        return {"format": tuple(self.formats), **self.knobs}

    def size(self) -> int:
        return sum(1 for _ in self.candidates())

    def valid(self, config: dict) -> bool:
        """Whether ``config`` can compile: horizontal fusion on the CPU needs sub-formats with
        disjoint rows; fusing rows and columns (``sparse_fuse``) needs CSR."""
        from ..formats import parse_format

        fmt = parse_format(config["format"])
        if config.get("horizontal_fuse") and self.device == "cpu" and not (fmt.name == "hyb" and fmt.rows_disjoint()):
            return False
        return not (config.get("sparse_fuse") and fmt.name != "csr")

    def candidates(self):
        """Every valid candidate, the default first."""
        names = list(self.dimensions())
        for values in itertools.product(*self.dimensions().values()):
            config = dict(zip(names, values))
            if self.valid(config):
                yield config

    def random(self, rng: random.Random) -> dict:
        for _ in range(100):
            config = {name: rng.choice(values) for name, values in self.dimensions().items()}
            if self.valid(config):
                return config
        return self.default()

    def neighbours(self, config: dict) -> list[dict]:
        """Valid candidates that differ from ``config`` in one dimension."""
        result = []
        for name, values in self.dimensions().items():
            for value in values:
                if value != config.get(name):
                    changed = {**config, name: value}
                    if self.valid(changed):
                        result.append(changed)
        return result


def search_space(op: str, matrix, device: str) -> SearchSpace:
    """The space of ``op`` ("spmm" or "sddmm") on ``matrix`` for ``device`` ("cpu" or "cuda")."""
    if (op, device) not in KNOB_VALUES:
        raise ValueError(f"no search space for op {op!r} on {device!r}")
    return SearchSpace(op, device, format_choices(matrix, op), dict(KNOB_VALUES[(op, device)]))


def config_key(config: dict) -> str:
    """A stable text key for a candidate (dict order and None handled)."""
    return ",".join(f"{name}={config[name]}" for name in sorted(config))
