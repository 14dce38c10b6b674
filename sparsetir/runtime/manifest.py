"""The manifest of an exported kernel: a fixed schema, a format version and a digest over itself.

``Kernel.export``/``BatchedKernel.export``/``CompiledFunction.export`` write ``<path>.json`` with
:func:`seal`; ``runtime.load`` reads it back with :func:`read_export_manifest`, which refuses,
with a ``ValueError`` naming the file and the field (never a ``KeyError`` or ``JSONDecodeError``):

- a file that is not UTF-8 JSON, or not an object;
- a manifest whose ``manifest_sha256`` is not the sha256 of its own canonical content (every
  other field, as JSON with sorted keys and no spaces): any changed byte, a truncated file, a
  renamed or removed key;
- an older ``export_version`` (export again) or another ``format``;
- a missing field or one the schema does not know (so a renamed ``library_sha256`` is refused,
  not skipped), and every field of the wrong type or value, down to the signature's parameters,
  the kernel's spec and sizes.

The digests of the library (``library_sha256``, ``library_bytes``) and of the structure sidecar
(``sidecar_sha256``, for kernels) are required; the loader then checks the files against them.
The kernel cache's own manifests (``backend.cache``) are not exports and keep their own check.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from .signature import evaluate_check

MANIFEST_FORMAT = "sparsetir-function/1"  # what the compiled library is (the cache's manifests say so too)
EXPORT_VERSION = 2  # the export's schema: 2 = sealed (manifest_sha256), every digest required
MANIFEST_SHA256 = "manifest_sha256"
LIBRARY_SHA256, LIBRARY_BYTES, SIDECAR_SHA256 = "library_sha256", "library_bytes", "sidecar_sha256"

_HEX64 = re.compile(r"[0-9a-f]{64}")
_ROLES = ("buffer", "indptr", "indices", "size")


def canonical_digest(manifest: dict) -> str:
    """The sha256 of ``manifest`` without its own digest, as canonical JSON (sorted keys, no spaces)."""
    content = {key: value for key, value in manifest.items() if key != MANIFEST_SHA256}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def seal(manifest: dict) -> dict:
    """``manifest`` with its format version and its digest over its own canonical content."""
    manifest = {key: value for key, value in manifest.items() if key != MANIFEST_SHA256}
    manifest["export_version"] = EXPORT_VERSION
    manifest[MANIFEST_SHA256] = canonical_digest(manifest)
    return manifest


def write_export_manifest(path: Path, manifest: dict) -> None:
    """Seal ``manifest``, check it against the schema (an export never writes what load refuses), write it."""
    sealed = seal(manifest)
    check_schema(sealed, str(path))
    Path(path).write_text(json.dumps(sealed, indent=1, sort_keys=True))


def read_export_manifest(path) -> dict:
    """The manifest at ``path``, verified (digest, version, schema); see the module docstring."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
        manifest = json.loads(text)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found: export with Kernel.export(path) first") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(f"{path} is not a readable manifest (not UTF-8 JSON: {error}); the file is truncated or "
                         "damaged: export the kernel again") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{path} is not a manifest: a JSON object was expected, got {type(manifest).__name__}")
    recorded = manifest.get(MANIFEST_SHA256)
    if recorded is None:
        raise ValueError(f"{path}: field {MANIFEST_SHA256!r} is missing: the manifest is from an older sparsetir "
                         f"or was edited; export the kernel again")
    try:
        actual = canonical_digest(manifest)
    except (TypeError, ValueError) as error:  # NaN or a value JSON cannot hold canonically
        raise ValueError(f"{path}: the manifest's content cannot be digested ({error})") from None
    if recorded != actual:
        raise ValueError(f"{path}: field {MANIFEST_SHA256!r} does not match the manifest's content: the manifest "
                         "was changed or damaged after export; export the kernel again")
    check_schema(manifest, str(path))
    return manifest


# ------------------------------------------------------------------------------------------ schema
class _Check:
    def __init__(self, where: str):
        self.where = where

    def fail(self, field: str, problem: str):
        raise ValueError(f"{self.where}: field {field!r} {problem}")

    def object(self, value, field: str, required: dict, optional: dict = ()) -> dict:
        if not isinstance(value, dict):
            self.fail(field, f"must be an object, got {type(value).__name__}")
        optional = dict(optional)
        for key in value:
            if not isinstance(key, str) or (key not in required and key not in optional):
                self.fail(f"{field}.{key}" if field else str(key), "is not part of the manifest's schema")
        for key, check in required.items():
            if key not in value:
                self.fail(f"{field}.{key}" if field else key, "is missing")
            check(value[key], f"{field}.{key}" if field else key)
        for key, check in optional.items():
            if key in value:
                check(value[key], f"{field}.{key}" if field else key)
        return value

    def string(self, value, field: str, choices=None, pattern=None) -> str:
        if not isinstance(value, str):
            self.fail(field, f"must be a string, got {type(value).__name__}")
        if choices is not None and value not in choices:
            self.fail(field, f"must be one of {list(choices)}, got {value!r}")
        if pattern is not None and not pattern.fullmatch(value):
            self.fail(field, f"has the wrong form: {value!r}")
        return value

    def integer(self, value, field: str, low: int = 0, allow_none: bool = False):
        if value is None and allow_none:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            self.fail(field, f"must be an int >= {low}, got {value!r}")
        return value

    def boolean(self, value, field: str):
        if not isinstance(value, bool):
            self.fail(field, f"must be true or false, got {value!r}")
        return value

    def strings(self, value, field: str, names=None) -> list:
        if not isinstance(value, list):
            self.fail(field, f"must be a list, got {type(value).__name__}")
        for i, item in enumerate(value):
            self.string(item, f"{field}[{i}]", choices=names)
        return value

    def any_json(self, value, field: str):
        return value


def _identifier(check: _Check):
    def validate(value, field):
        check.string(value, field)
        if not value.isidentifier():
            check.fail(field, f"must be an identifier, got {value!r}")

    return validate


def _shape_expression(check: _Check):
    def validate(value, field):
        check.string(value, field)
        problem = evaluate_check(value)
        if problem:
            check.fail(field, problem)

    return validate


def check_schema(manifest: dict, where: str) -> None:
    """Every field of an export manifest, by the fixed schema (a ValueError naming ``where`` and the field)."""
    c = _Check(where)
    sha = lambda v, f: c.string(v, f, pattern=_HEX64)  # noqa: E731
    kernel_present = isinstance(manifest, dict) and "kernel" in manifest
    required = {
        "format": lambda v, f: c.string(v, f, choices=(MANIFEST_FORMAT,)),
        "export_version": lambda v, f: _version(c, v, f),
        "name": _identifier(c),
        "device": lambda v, f: c.string(v, f, choices=("cpu", "cuda")),
        "signature": lambda v, f: _signature(c, v, f),
        "source_suffix": lambda v, f: c.string(v, f, choices=(".ll", ".cu")),
        LIBRARY_SHA256: sha,
        LIBRARY_BYTES: lambda v, f: c.integer(v, f, low=1),
        MANIFEST_SHA256: sha,
    }
    optional = {
        "target": lambda v, f: _target(c, v, f),
        "versions": lambda v, f: _string_map(c, v, f),
        "fatbin": lambda v, f: c.strings(v, f),
        "function": lambda v, f: _function(c, v, f),
    }
    if kernel_present:
        required["kernel"] = lambda v, f: _kernel(c, v, f, manifest.get("signature"))
        required[SIDECAR_SHA256] = sha
    c.object(manifest, "", required, optional)


def _target(c: _Check, value, field: str):
    """A TVM target dict: its ``kind`` is checked; its other options are TVM's (any JSON values)."""
    if not isinstance(value, dict):
        c.fail(field, f"must be an object, got {type(value).__name__}")
    c.object(value, field, {"kind": lambda x, g: c.string(x, g, choices=("llvm", "cuda"))},
             {key: c.any_json for key in value if isinstance(key, str) and key != "kind"})


def _version(c: _Check, value, field: str):
    if isinstance(value, bool) or not isinstance(value, int):
        c.fail(field, f"must be an int, got {value!r}")
    if value != EXPORT_VERSION:
        c.fail(field, f"is {value}, but this sparsetir reads exports of version {EXPORT_VERSION}: export the kernel "
                      "again with this version")


def _string_map(c: _Check, value, field: str):
    if not isinstance(value, dict):
        c.fail(field, f"must be an object, got {type(value).__name__}")
    for key, item in value.items():
        c.string(item, f"{field}.{key}")


def _signature(c: _Check, value, field: str):
    shape = _shape_expression(c)
    names: list[str] = []

    def params(items, f):
        if not isinstance(items, list) or not items:
            c.fail(f, f"must be a non-empty list, got {items!r}")
        for i, param in enumerate(items):
            c.object(param, f"{f}[{i}]", {
                "name": _identifier(c), "role": lambda v, g: c.string(v, g, choices=_ROLES),
                "of": lambda v, g: v is None or c.string(v, g), "dtype": lambda v, g: c.string(v, g, choices=_DTYPES),
                "shape": lambda v, g: [shape(s, f"{g}[{j}]") for j, s in enumerate(_list(c, v, g))],
            }, {"coordinates_of": lambda v, g: [c.object(u, f"{g}[{j}]", {
                "axis": lambda x, h: c.string(x, h), "length": shape}) for j, u in enumerate(_list(c, v, g))]})
            names.append(param["name"])
        if len(set(names)) != len(names):
            c.fail(f, "names a parameter twice")

    def axes(items, f):
        for i, axis in enumerate(_list(c, items, f)):
            meta = lambda v, g: v is None or c.string(v, g, choices=names)  # noqa: E731
            expr = lambda v, g: v is None or shape(v, g)  # noqa: E731
            c.object(axis, f"{f}[{i}]", {"name": c.string, "kind": c.string, "parent": lambda v, g: v is None or
                                         c.string(v, g), "length": expr, "indptr": meta, "indices": meta,
                                         "sorted": c.boolean},
                     {"nnz": expr, "nnz_cols": expr, "distinct": c.boolean, "disjoint": c.boolean})

    c.object(value, field, {"params": params, "axes": lambda v, f: axes(v, f),
                            "outputs": lambda v, f: c.strings(v, f, names=names)})


_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


def _list(c: _Check, value, field: str) -> list:
    if not isinstance(value, list):
        c.fail(field, f"must be a list, got {type(value).__name__}")
    return value


def _kernel(c: _Check, value, field: str, signature) -> None:
    names = [p["name"] for p in signature["params"]] if isinstance(signature, dict) else []

    def sizes(v, f):
        if not isinstance(v, dict):
            c.fail(f, f"must be an object, got {type(v).__name__}")
        for key, size in v.items():
            c.integer(size, f"{f}.{key}")

    def _feat(v, f):
        for i, item in enumerate(v if isinstance(v, list) else [v]):
            c.integer(item, f"{f}[{i}]" if isinstance(v, list) else f, low=1)

    def spec(v, f):
        batched = isinstance(v, dict) and "batched" in v
        required = {"op": _identifier(c), "dtype": lambda x, g: c.string(x, g, choices=_DTYPES),
                    "inputs": lambda x, g: c.strings(x, g, names=names),
                    "outputs": lambda x, g: c.strings(x, g, names=names)}
        optional = {"format": c.string, "transpose_a": c.boolean, "dataflow": c.string, "feat": _feat,
                    "feature_loops": lambda x, g: c.string(x, g, choices=("kl", "lk")),
                    "index_dtype": lambda x, g: c.string(x, g, choices=("int32", "int64"))}
        if batched:
            required["batched"] = lambda x, g: _batched(c, x, g, names)
            optional.update({"block": lambda x, g: c.integer(x, g, low=1),
                             "scale": lambda x, g: x is None or _number(c, x, g)})
        else:
            required["values"] = lambda x, g: c.strings(x, g, names=names)
        c.object(v, f, required, optional)
        if not v["inputs"] or len(v["outputs"]) != 1:
            c.fail(f, "must name at least one input and exactly one output")

    c.object(value, field, {"spec": spec, "sizes": sizes,
                            "nnz": lambda v, f: c.integer(v, f, allow_none=True)})


#: An exported function of an op (``Kernel`` has ``kernel`` instead): op -> kind -> its option fields.
FUNCTION_OPS = {"edge_softmax": {"forward": ("negative_slope", "dropout"), "backward": ("negative_slope", "dropout"),
                                 "aggregate": ()}}


def _function(c: _Check, value, field: str) -> None:
    """``function``: which function of which op (``runtime.edge_softmax``), and its compile options."""
    if not isinstance(value, dict):
        c.fail(field, f"must be an object, got {type(value).__name__}")
    op = c.string(value.get("op"), f"{field}.op", choices=tuple(FUNCTION_OPS))
    kind = c.string(value.get("kind"), f"{field}.kind", choices=tuple(FUNCTION_OPS[op]))
    checks = {"negative_slope": lambda v, f: _number(c, v, f), "dropout": c.boolean}
    required = {"op": c.string, "kind": c.string, "heads": lambda v, f: c.integer(v, f, low=1),
                "feat": lambda v, f: c.integer(v, f, low=1), "dtype": lambda v, f: c.string(v, f, choices=_DTYPES),
                **{name: checks[name] for name in FUNCTION_OPS[op][kind]}}
    c.object(value, field, required)


def _number(c: _Check, value, field: str):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value == value:
        c.fail(field, f"must be a number, got {value!r}")


def _batched(c: _Check, value, field: str, names: list) -> None:
    def rows(v, f):
        if not isinstance(v, dict):
            c.fail(f, f"must be an object, got {type(v).__name__}")
        for key, pair in v.items():
            c.string(key, f"{f}.{key}", choices=names)
            if not isinstance(pair, list) or len(pair) != 2:
                c.fail(f"{f}.{key}", f"must be [rows, padded rows], got {pair!r}")
            c.integer(pair[0], f"{f}.{key}[0]", low=1)
            c.integer(pair[1], f"{f}.{key}[1]", low=pair[0])

    c.object(value, field, {"size": c.string, "heads": lambda v, f: c.integer(v, f, low=1, allow_none=True),
                            "dim": lambda v, f: c.integer(v, f, low=1), "rows": rows})
