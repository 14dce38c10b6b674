"""The base class of every sparse format: what a new format implements, capability by capability.

A format is one module in ``sparsetir/formats/`` holding a subclass of :class:`Format`
decorated with :func:`~sparsetir.formats.registry.register_format`. Nothing else changes:
the format-string parser, the ops, the tuner's search space and the GPU bundle's short list
read the registry and ask a format for capabilities, never for its name. ``csr.py`` is the
smallest example; ``ell.py`` a whole format with conversion and rewrite rules in ~120 lines.

Every op is written once over CSR (rows ``I``, stored columns ``J``; see ``structure.py``).
A format says how its host arrays are built from canonical CSR and how the op's CSR
iteration is rewritten onto its axes; ``format_decompose`` does the rewriting.

Capabilities (override what applies; the defaults suit a format that needs none):

``name``, ``fields``
    The format-string head and the fields after it: ``"ell:32"`` is ``ELL(width=32)`` with
    ``fields = (Field("width", default=None),)``. A field without a default is required.
``input``, ``ops``
    The kind of input it stores (``"csr"``: one sparse matrix, the default; ``"relational"``:
    one per relation, ``relational.py``) and the ops it supports: ``None`` (every op over that
    kind of input, the default) or a tuple of op names.
``resolve(A) -> Format``
    This format with every matrix-dependent parameter filled in (``ELL()`` -> ``ELL(width)``).
``structure_key() -> tuple``
    Everything that changes the compiled kernel, not the matrix sizes (kernel cache key).
``_build(canonical, values, index_dtype) -> matrix``
    Host arrays from canonical CSR (rows sorted, duplicates summed); ``convert(A)`` calls it.
``rewrite_rules(source, device) -> list[FormatRewriteRule]``
    One rule per sub-format: its axes and the map from its coordinates back to ``I`` and ``J``.
    No rules (CSR) means the op's own iteration runs unchanged.
``slot_keys(device)``, ``bind(matrix, value_buffers, device)``, ``sizes(matrix)``
    The rule suffixes with the key of their value array, the kernel parameters holding the
    structure (and values), and the size variables.
``padded``
    Whether its value arrays hold padding slots. Then ``convert`` writes -0.0 into them (a stored
    zero becomes +0.0) and its rules pass ``padded=True`` to ``make_rule``, so a reduction reading
    them skips padding (``sparsetir.ir.padding``): a NaN in the dense operand reaches only the rows
    that store its column, as in ``torch.sparse.mm``.
``rows_disjoint() -> bool``
    Whether the sub-formats write disjoint output rows (one parallel region is then race-free).
``tuning_candidates(matrix, op, device) -> list[str]`` (classmethod)
    The format strings worth trying for ``matrix`` (a validated ``CSRMatrix``); ``[]`` keeps the
    format out of the tuner's search space. ``tuning_order`` places them in the space, and
    ``tuning_devices`` names the devices whose search spaces include the format at all (a format
    that measurably loses on a device stays usable there by name).
``row_access_cost(matrix) -> float | None``, ``cost_group() -> object``
    A static cost (rows of the dense operand read plus rows of the output written) for
    ranking candidates without measuring (the GPU bundle's short list), and the group a
    diverse short list takes one of first; ``None`` leaves the format out of that ranking.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..runtime.slot_layout import mark_padding
from .matrix import cast_values, read_sparse_input
from .slots import SlotMatrix


@dataclass(frozen=True)
class Field:
    """One parameter of a format, and a field of its format string.

    ``kind`` is ``"int"`` (``32``: an integer >= 1) or ``"ints"`` (``1,2,4``: each an ``item``);
    a field without a ``default`` is required; a default of None means "from the matrix"
    (``resolve``). ``doc`` names it in messages; ``check`` validates an ``"ints"`` value and
    returns it as stored.
    """

    name: str
    kind: str = "int"
    default: object = ...
    item: str = "item"
    doc: str = ""
    check: Callable | None = None

    @property
    def required(self) -> bool:
        return self.default is ...

    def value(self, given, owner: str):
        """``given`` validated (a ValueError naming ``owner``'s parameter), as the format stores it."""
        if given is None and self.default is None:
            return None
        if self.kind == "ints":
            return self.check(given) if self.check else tuple(
                positive_int(item, owner=owner, name=self.item) for item in given)
        return positive_int(given, owner=owner, name=f"{self.name} ({self.doc})" if self.doc else self.name)


def positive_int(value, *, owner: str, name: str) -> int:
    """``value`` as an int >= 1; a ValueError naming ``owner``'s parameter otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{owner}: {name} must be an integer >= 1, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{owner}: {name} must be an integer >= 1, got {value!r}") from None
    if number < 1:
        raise ValueError(f"{owner}: {name} must be >= 1, got {number}")
    return number


class Format:
    """Base of the format objects (see the module docstring for what a subclass provides)."""

    name = ""
    fields: tuple = ()
    input = "csr"
    ops: tuple | None = None
    tuning_order = 100
    tuning_devices: tuple = ("cpu", "cuda")
    rewrites = True  # False only for the format the ops are written over (CSR)
    padded = False  # value arrays with padding slots (ir.padding): -0.0 there, and rules made padded=True
    dense_blocks = False  # every outer row is a dense block of rows (bsr, dbsr, srbcrs): transform.stage_rows

    def __init__(self, *args, **kwargs):
        """The parameters, by position or name, in the order of ``fields``; each checked."""
        names = [field.name for field in self.fields]
        owner = type(self).__name__
        if len(args) > len(names):
            raise TypeError(f"{owner} takes {len(names)} parameter(s) {names}, got {len(args)}")
        given = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names or name in given:
                raise TypeError(f"{owner}: unexpected or repeated parameter {name!r}; parameters: {names}")
            given[name] = value
        for field in self.fields:
            value = given.get(field.name, field.default)
            if value is ...:
                raise TypeError(f"{owner}: missing parameter {field.name!r}")
            setattr(self, field.name, field.value(value, owner))

    @property
    def param_names(self) -> tuple:
        return tuple(field.name for field in self.fields)

    def params(self) -> tuple:
        return tuple(getattr(self, name) for name in self.param_names)

    @classmethod
    def supports(cls, op: str) -> bool:
        """Whether ``op`` can run in this format."""
        return cls.ops is None or op in cls.ops

    @classmethod
    def syntax(cls) -> str:
        """The format-string syntax, e.g. ``hyb[:<col_parts>[:<buckets,...>]]``."""
        text, closing = cls.name, ""
        for field in cls.fields:
            part = f":<{field.name}{',...' if field.kind == 'ints' else ''}>"
            if field.required:
                text += part
            else:
                text += "[" + part
                closing += "]"
        return text + closing

    def structure_key(self) -> tuple:
        """Everything that changes the compiled kernel (not the matrix sizes).

        A parameter left as ``None`` depends on the matrix, so there is no key until ``resolve(A)``.
        """
        unresolved = [name for name, value in zip(self.param_names, self.params()) if value is None]
        if unresolved:
            raise ValueError(
                f"{self!r}: {', '.join(unresolved)} depend(s) on the matrix; "
                "call fmt.resolve(A) before asking for a structure key"
            )
        return (self.name, *self.params())

    def resolve(self, A) -> Format:
        """This format with every matrix-dependent parameter filled in from ``A`` (self when there is none)."""
        return self

    def rows_disjoint(self) -> bool:
        """Whether the sub-formats write disjoint output rows (then one parallel region is race-free)."""
        return False

    def sub_format_count(self) -> int:
        """How many sub-formats (rewrite rules) the resolved format has; 0 for CSR."""
        return len(self.slot_keys("cpu"))

    def convert(self, A, *, dtype: str = "float32", index_dtype: str = "int32"):
        """Host arrays of ``A`` (scipy sparse, torch sparse or ``CSRMatrix``) in this format."""
        canonical = read_sparse_input(A, canonical=True)
        values = cast_values(canonical.values, dtype)
        matrix = self._build(canonical, values, index_dtype)
        if self.padded and isinstance(matrix, SlotMatrix):  # padding slots hold -0.0, which the kernels skip
            for slots in matrix.slot_arrays().values():
                mark_padding(slots.values, slots.csr_position)
        return matrix

    def _build(self, canonical, values: np.ndarray, index_dtype: str):
        raise NotImplementedError(f"{type(self).__name__} does not implement _build")

    def rewrite_rules(self, source, device: str) -> list:
        raise NotImplementedError(f"{type(self).__name__} does not implement rewrite_rules")

    def slot_keys(self, device: str = "cpu") -> list:
        return []

    def bind(self, matrix, value_buffers, device: str = "cpu") -> dict:
        raise NotImplementedError(f"{type(self).__name__} does not implement bind")

    def sizes(self, matrix) -> dict:
        raise NotImplementedError(f"{type(self).__name__} does not implement sizes")

    @classmethod
    def tuning_candidates(cls, matrix, op: str, device: str) -> list[str]:
        """Format strings worth trying for ``matrix``; none by default."""
        return []

    def row_access_cost(self, matrix) -> float | None:
        """Static cost for ranking without measuring; None: not ranked."""
        return None

    def cost_group(self):
        """The group a diverse short list takes one format of first."""
        return None

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.params() == self.params()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.params()))

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={value!r}" for name, value in zip(self.param_names, self.params()))
        return f"{type(self).__name__}({args})"
