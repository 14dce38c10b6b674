"""How a format plugs into the compiler: the CSR iteration space it rewrites, and its rewrite rules.

Every op is written once over CSR (rows ``I``, stored columns ``J``). A format
other than CSR provides ``rewrite_rules(source, device)``: one
``FormatRewriteRule`` per sub-format (its axes, its buffers, and the map from
its coordinates back to ``I`` and ``J``), which ``format_decompose`` applies.
It also provides ``slot_keys(device)`` (rule suffix -> key of the matching host value
array, None for a sub-format without values), ``bind(matrix, value_buffers)`` (kernel parameters) and ``sizes(matrix)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Axis, SparseBuffer, size_var
from ..transform.decompose import FormatRewriteRule


@dataclass
class SourceAxes:
    """The CSR iteration space of an op: rows, columns, the buffers laid out over them, and
    the kinds ("S"/"R") rows and columns have in the op's iteration."""

    rows: Axis
    cols: Axis
    buffers: list
    row_kind: str
    col_kind: str
    sizes: dict = field(default_factory=dict, repr=False)  # name -> its size variable, made once

    @property
    def idtype(self) -> str:
        return self.rows.idtype

    def size(self, name: str):
        """The size variable ``name`` of this iteration space (one variable per name: an op that declares
        a buffer over a format's size, e.g. ``nb * b`` rows, gets the one the format's rules use)."""
        if name not in self.sizes:
            self.sizes[name] = size_var(name, self.idtype)
        return self.sizes[name]


def make_rule(source: SourceAxes, suffix: str, loops, roles: str, coordinates, *, layout=None,
              atomic: bool = False, covers_output: bool = False, owns_rows: bool = False,
              padded: bool = False) -> FormatRewriteRule:
    """A rule whose loops play the row ("r") or column ("c") role given by ``roles``; every
    source buffer gets a counterpart ``<name>_<suffix>`` over ``layout`` (default: the loops).
    ``padded``: the sub-format's value arrays hold padding slots (``ir.padding``: reductions skip them)."""
    kinds = "".join(source.row_kind if role == "r" else source.col_kind for role in roles)
    layout = tuple(loops) if layout is None else tuple(layout)
    buffers = {b: SparseBuffer(f"{b.name}_{suffix}", layout, b.dtype) for b in source.buffers}
    return FormatRewriteRule(suffix, (source.rows, source.cols), tuple(loops), kinds, buffers, coordinates,
                             atomic=atomic, covers_output=covers_output, owns_rows=owns_rows,
                             padded=padded)


def value_params(value_buffers, suffix: str, values) -> dict:
    """Kernel parameters holding ``values`` for each value buffer's ``suffix`` counterpart."""
    return {f"{name}_{suffix}": values for name in value_buffers}
