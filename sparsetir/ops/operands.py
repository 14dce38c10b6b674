"""Shared pieces of the user-level ops: operand checks, format composition, kernel construction."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace

import numpy as np

from .. import hooks
from ..backend import build, device_of, normalize_target
from ..backend.cache import index_lookup, index_store
from ..formats import parse_format, read_sparse_input, registered_formats
from ..formats.matrix import choose_index_dtype
from ..ir import dense_fixed, size_vars, sparse_variable
from ..runtime.function import CompiledFunction
from ..runtime.kernel import Kernel
from ..runtime.marshal import is_torch
from ..runtime.slot_layout import SlotLayout
from ..runtime.validate import dtype_name
from ..schedule.knobs import Knob, boolean, knob, optional_boolean, register_knob, split_knobs
from ..transform import format_decompose, horizontal_fuse
from .registry import check_feat, get_op

DEVICE_DTYPES = {"cpu": ("float16", "bfloat16", "float32", "float64"),
                 "cuda": ("float16", "bfloat16", "float32", "float64")}
HALF_DTYPES = ("float16", "bfloat16")  # accumulate in float32 unless accum_dtype says otherwise
_compiled: dict[tuple, object] = {}


def _fusable(value, fmt, device: str) -> bool:
    """horizontal_fuse=True needs several sub-formats, and on the CPU ones that write disjoint rows."""
    if not value:
        return True
    try:
        return fmt.sub_format_count() > 1 and (device != "cpu" or fmt.rows_disjoint())
    except ValueError:  # a format whose parameters depend on the matrix: decided when compiling
        return True


# The knobs the ops consume themselves (scope "op"); the rest go to the schedule template.
register_knob(Knob("horizontal_fuse", ("cpu", "cuda"), None, (None, True), optional_boolean("horizontal_fuse"),
                   "run a format's sub-formats as one loop (None: on CUDA, one launch)", scope="op",
                   requires=_fusable, requirement="it needs a format with several sub-formats, and on the CPU "
                   "sub-formats that write disjoint rows (else one parallel region would race; use "
                   "horizontal_fuse=False: they then run one after another)"))
register_knob(Knob("specialize", ("cpu", "cuda"), False, (False, True), boolean("specialize"),
                   "compile the matrix's sizes as constants (one kernel per matrix)", scope="op"))


def _accum_dtype(value):
    if value is not None and value not in ("float32", "float64"):
        raise ValueError(f"accum_dtype must be 'float32', 'float64' or None, got {value!r}")
    return value


register_knob(Knob("accum_dtype", ("cpu", "cuda"), None, (None,), _accum_dtype,
                   "reduce in this wider float (None: float32 for float16/bfloat16 kernels, else the kernel's "
                   "own dtype)", scope="op"))


def check_dense_operand(array, name: str, *, ndim: int = 2) -> str:
    """A numpy array or torch tensor of ``ndim`` dimensions; returns its dtype name."""
    if not (type(array).__module__ == "numpy" or is_torch(array)) or not hasattr(array, "shape"):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(array).__name__}")
    if len(array.shape) != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(array.shape)}")
    return dtype_name(array)


def resolve_dtype(dtype, values_dtype, device: str) -> str:
    """The kernel value dtype: ``dtype`` if given, else A's float dtype (float32 for other kinds)."""
    if dtype is None:
        dtype = values_dtype.name if values_dtype.name in ("float32", "float64") else "float32"
    dtype = str(dtype).replace("torch.", "")
    if dtype not in DEVICE_DTYPES[device]:
        raise TypeError(f"dtype {dtype} is not supported on {device}; supported: {DEVICE_DTYPES[device]}")
    return dtype


def compose_format(func, fmt, source, device: str, *, fuse=None, disjoint_outputs: bool = False,
                   skip_padding: bool = True):
    """Rewrite a CSR op into ``fmt``'s sub-formats and, if asked, fuse them horizontally.

    ``fuse``: run the sub-formats as one loop (default: on CUDA, one launch). On the CPU that
    loop is one parallel region, refused when sub-formats write the same output rows.
    ``skip_padding=False``: a padded format's reductions are not guarded (``ir.padding``): a padding
    slot multiplies its dense operand as a zero (a dense block's product on tensor cores, whose
    ``mma_sync`` takes the block as it is; ``docs/nan-semantics.md`` lists where that differs).
    """
    rules = fmt.rewrite_rules(source, device)
    if not skip_padding:
        rules = [replace(rule, padded=False) for rule in rules]
    if not rules:
        if fuse:
            raise ValueError(f"horizontal_fuse needs a format with several sub-formats, not {fmt!r}")
        return func
    (iteration,) = func.iterations
    func = format_decompose(func, rules)
    fuse = device == "cuda" if fuse is None else bool(fuse)
    if fuse and len(rules) > 1:
        disjoint = disjoint_outputs or fmt.rows_disjoint()
        if device == "cpu" and not disjoint:
            raise ValueError(f"{fmt!r}: its sub-formats write the same output rows, so one parallel region "
                             f"would race; use horizontal_fuse=False (they then run one after another)")
        func = horizontal_fuse(func, [f"{iteration.name}_{rule.name}" for rule in rules], disjoint=disjoint)
    return func


def compiled_function(op: str, make_function, fmt, feat: int, dtype: str, idtype: str, target: dict, knobs: dict,
                      sizes: dict):
    """Compile (once per process and key) the Stage I function ``make_function()`` builds.

    With the knob ``specialize=True`` the matrix's sizes become constants (one kernel per matrix).
    An on-disk index maps the key to the kernel an earlier process built, skipping lowering.
    """
    bound = dict(sorted(sizes.items())) if knobs.get("specialize") else None
    key = (op, fmt.structure_key(), feat, dtype, idtype, json.dumps(target, sort_keys=True),
           tuple(sorted(knobs.items())), json.dumps(bound))
    if key not in _compiled:
        library = index_lookup(*key)  # compiled by an earlier process: no need to lower and schedule again
        if library is not None:
            _compiled[key] = CompiledFunction(library)
        else:
            schedule_knobs = split_knobs(device_of(target), knobs)[1]
            func = make_function()
            specialized = {v.name: bound[v.name] for v in func.size_vars if v.name in bound} if bound else None
            _compiled[key] = build(func, target, specialize=specialized, **schedule_knobs)
            index_store(_compiled[key].library, *key)
    return _compiled[key]


@dataclass
class OperandAxes:
    """The axes every op over CSR declares: rows, stored columns, dense columns, features."""

    rows: object
    cols: object
    dense_cols: object
    features: object


def csr_operand_axes(feat: int, idtype: str) -> OperandAxes:
    m, n, nnz = size_vars("m n nnz", idtype)
    rows = dense_fixed("I", m, idtype)
    return OperandAxes(rows, sparse_variable("J", rows, n, nnz), dense_fixed("J_", n, idtype),
                       dense_fixed("K", feat, idtype))


@dataclass
class PreparedMatrix:
    """A validated input in its format's host arrays, with the dtypes and target a kernel needs."""

    fmt: object
    matrix: object  # the validated CSR input (canonical when asked)
    converted: object  # its host arrays in ``fmt``
    feat: int
    dtype: str
    idtype: str
    target: dict
    device: str
    convert_s: float


def prepare_matrix(A, feat, *, format, target, dtype, index_dtype, canonical: bool = False) -> PreparedMatrix:
    """Check ``feat`` and the target, validate A, pick dtypes and convert A to its format (timed)."""
    feat = check_feat(feat)
    target, device = target_and_device(target)
    started = time.perf_counter()
    matrix = read_sparse_input(A, canonical=canonical)
    fmt = resolved_format(format, matrix)
    dtype = resolve_dtype(dtype, matrix.values.dtype, device)
    m, n = matrix.shape
    idtype = choose_index_dtype(m + 1, n + 1, matrix.nnz, m * feat, n * feat, requested=index_dtype)
    converted = fmt.convert(matrix, dtype=dtype, index_dtype=idtype)
    return PreparedMatrix(fmt, matrix, converted, feat, dtype, idtype, target, device, time.perf_counter() - started)


def make_kernel(op: str, make_function, prepared: PreparedMatrix, *, knobs, inputs, output,
                output_per_slot: bool = False) -> Kernel:
    """Bind a compiled op to the prepared matrix's structure; records conversion and compile times.

    ``output_per_slot``: the op's output has A's pattern (SDDMM), so a decomposed kernel writes
    one output per sub-format, gathered back into CSR order.
    """
    fmt, matrix, feat, dtype, idtype = prepared.fmt, prepared.converted, prepared.feat, prepared.dtype, prepared.idtype
    target, device, convert_s = prepared.target, prepared.device, prepared.convert_s
    started = time.perf_counter()
    function = compiled_function(op, make_function, fmt, feat, dtype, idtype, target, knobs, fmt.sizes(matrix))
    compile_s = time.perf_counter() - started
    bound = owned(fmt.bind(matrix, ["A"], device), prepared.matrix)
    suffixes = fmt.slot_keys(device)
    layout = None
    if suffixes:
        positions = matrix.slot_positions()
        value_slots = {f"A_{s}": (positions[key] if key is not None else np.zeros(0, np.int64)).reshape(
            bound[f"A_{s}"].shape) for s, key in suffixes}
        output_slots = ({f"{output}_{s}": value_slots[f"A_{s}"] for s, _ in suffixes} if output_per_slot else {})
        layout = SlotLayout(matrix.nnz, value_slots, output_slots)
        values, outputs = list(value_slots), list(output_slots) or [output]
    else:
        values, outputs = ["A"], [output]
    spec = {"op": op, "format": repr(fmt), "feat": feat, "dtype": dtype, "index_dtype": idtype,
            "inputs": inputs, "outputs": outputs, "values": values}
    kernel = Kernel(function, spec, bound, fmt.sizes(matrix), layout)
    kernel.timings = {"convert_s": convert_s, "compile_s": compile_s}
    return kernel


def owned(bound: dict, source) -> dict:
    """The kernel's structure arrays, copied where they share memory with the caller's matrix
    ``source`` (so editing A after compiling cannot change or crash the kernel), and read-only."""
    caller = [a for a in (source.indptr, source.indices, source.values) if isinstance(a, np.ndarray)]
    out = {}
    for name, array in bound.items():
        if isinstance(array, np.ndarray):
            if any(np.may_share_memory(array, c) for c in caller):
                array = array.copy()
            array.flags.writeable = False
        out[name] = array
    return out


def tuned_format(op: str, A, feat, format, target, dtype, knobs: dict) -> tuple:
    """``format="auto"``: the format and knobs the registered resolver (``sparsetir.tune``) gives
    (explicit knobs win); any other format is returned as given."""
    if not (isinstance(format, str) and format.strip().lower() == "auto"):
        return format, knobs
    config = hooks.format_resolver()(op, A, feat, target=target, dtype=dtype)
    if not isinstance(config, dict) or not isinstance(config.get("format"), str):
        raise ValueError(f"format='auto': the tuner's configuration for {op} has no format: {config!r}")
    return config["format"], {**{k: v for k, v in config.items() if k != "format"}, **knobs}


def prepare_op(op: str, A, feat, *, format, target, dtype, index_dtype, knobs: dict, canonical: bool = False):
    """What every ``compile_<op>`` does first: ``format="auto"`` resolved, the format checked to
    support ``op`` (before converting A), A validated and converted (timed), and the knobs
    checked with the op's own defaults filled in; returns ``(PreparedMatrix, knobs)``."""
    format, knobs = tuned_format(op, A, feat, format, target, dtype, knobs)
    fmt = parse_format(format)
    if not get_op(op).accepts(fmt):
        formats = ", ".join(cls.name for cls in registered_formats() if get_op(op).accepts(cls))
        raise ValueError(f"{op} does not run in the format {format!r}; it runs in {formats}")
    prepared = prepare_matrix(A, feat, format=fmt, target=target, dtype=dtype, index_dtype=index_dtype,
                              canonical=canonical)
    defaults = get_op(op).default_knobs(prepared.device)
    if prepared.dtype in HALF_DTYPES and knobs.get("accum_dtype") is None:
        defaults["accum_dtype"] = "float32"
    knobs = check_op_knobs({**defaults, **{k: v for k, v in knobs.items() if v is not None or k != "accum_dtype"}},
                           prepared.fmt, prepared.device)
    return prepared, knobs


def check_op_knobs(knobs: dict, fmt, device: str) -> dict:
    """The op-scope knobs in ``knobs`` checked, each also against the format it needs (ValueError)."""
    op_knobs, _ = split_knobs(device, knobs)
    for name, value in op_knobs.items():
        declared = knob(device, name)
        declared.check(value)
        if not declared.allows(value, fmt, device):
            raise ValueError(f"{name}={value!r} cannot build in {fmt!r} on {device}: {declared.requirement}")
    return knobs


def target_and_device(target) -> tuple[dict, str]:
    target = normalize_target(target)
    return target, device_of(target)


def resolved_format(fmt, matrix):
    """A format with its matrix-dependent parameters (ELL width, hyb buckets) filled in."""
    return parse_format(fmt).resolve(matrix)


