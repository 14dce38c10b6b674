"""An export's manifest verifies itself (issue 27, item 3): a fixed schema checked field by field
(unknown and missing keys refused), a format version, a digest over its own canonical content, and
required digests of the library and the structure sidecar. Every failure is a ValueError naming the
file and the field, never a KeyError or JSONDecodeError; a damaged library never loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sparsetir.runtime as runtime
from sparsetir.ops import compile_sparse_attention, compile_spmm
from sparsetir.runtime.manifest import EXPORT_VERSION, canonical_digest

A = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=0)
B = np.random.default_rng(0).standard_normal((30, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return compile_spmm(A, 8).export(tmp_path_factory.mktemp("export") / "spmm.so")


def copy_export(source: Path, folder: Path) -> Path:
    target = folder / source.name
    for suffix in ("", ".json", ".npz", ".ll"):
        if Path(str(source) + suffix).exists():
            Path(str(target) + suffix).write_bytes(Path(str(source) + suffix).read_bytes())
    return target


def manifest_of(path: Path) -> dict:
    return json.loads(Path(str(path) + ".json").read_text())


def write_manifest(path: Path, manifest: dict, *, reseal: bool) -> None:
    """Write ``manifest``; ``reseal``: with its digest recomputed over the edit (an attacker's rewrite)."""
    if reseal:
        manifest = {**manifest, "manifest_sha256": canonical_digest(manifest)}
    Path(str(path) + ".json").write_text(json.dumps(manifest))


def test_an_export_is_sealed_and_loads(exported):
    manifest = manifest_of(exported)
    assert manifest["export_version"] == EXPORT_VERSION
    assert manifest["manifest_sha256"] == canonical_digest(manifest)
    np.testing.assert_allclose(runtime.load(exported)(B), A @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reseal", [False, True], ids=["edited", "edited and resealed"])
@pytest.mark.parametrize("edit", ["remove", "rename"])
def test_the_library_digest_is_required_not_optional(exported, tmp_path, edit, reseal):
    """The old check ran only when a digest was recorded: renaming or removing the key let a damaged
    library load (wrong by 1e31, then SIGSEGV at exit)."""
    path = copy_export(exported, tmp_path)
    manifest = manifest_of(path)
    digest = manifest.pop("library_sha256")
    if edit == "rename":
        manifest["library_sha256_"] = digest
    write_manifest(path, manifest, reseal=reseal)
    field = "manifest_sha256" if not reseal else ("library_sha256_" if edit == "rename" else "library_sha256")
    with pytest.raises(ValueError, match=f"spmm.so.json: field '{field}'"):
        runtime.load(path)


def test_a_damaged_library_behind_a_resealed_manifest_without_its_digest_never_runs(exported, tmp_path):
    """In a fresh process (the old code crashed at exit): a ValueError, exit 0."""
    path = copy_export(exported, tmp_path)
    data = bytearray(path.read_bytes())
    for at in range(len(data) // 3, len(data) // 3 + 64):
        data[at] ^= 0x5A
    path.write_bytes(bytes(data))
    manifest = manifest_of(path)
    del manifest["library_sha256"]
    write_manifest(path, manifest, reseal=False)
    code = ("import numpy as np, sparsetir.runtime as rt\n"
            f"try:\n    print(rt.load({str(path)!r})(np.ones((30, 8), np.float32)).sum())\n"
            "except ValueError as e:\n    print('refused:', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "refused:" in run.stdout


@pytest.mark.parametrize("cut", [0, 1, 10, 0.5, -1])
def test_a_truncated_manifest_is_a_value_error_naming_the_file(exported, tmp_path, cut):
    path = copy_export(exported, tmp_path)
    text = Path(str(path) + ".json").read_text()
    keep = int(len(text) * cut) if isinstance(cut, float) else (cut if cut >= 0 else len(text) + cut)
    Path(str(path) + ".json").write_text(text[:keep])
    with pytest.raises(ValueError, match=r"spmm\.so\.json"):
        runtime.load(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_byte_flip_in_the_manifest_is_a_value_error(exported, tmp_path_factory, data):
    path = copy_export(exported, tmp_path_factory.mktemp("flip"))
    raw = bytearray(Path(str(path) + ".json").read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1))
    original = bytes(raw)
    raw[at] ^= data.draw(st.integers(1, 255))
    # a flip of one whitespace byte into another (" " ^ 42 is a newline) leaves the same manifest: not damage
    assume(not _same_json(original, bytes(raw)))
    Path(str(path) + ".json").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"spmm\.so\.json"):
        runtime.load(path)


def _same_json(a: bytes, b: bytes) -> bool:
    try:
        return json.loads(a) == json.loads(b)
    except (ValueError, UnicodeDecodeError):
        return False


def _drop(key):
    def edit(manifest):
        manifest.pop(key)
    return edit


def _set(*keys, value):
    def edit(manifest):
        target = manifest
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return edit


SCHEMA_EDITS = {  # each resealed, so only the schema stands in the way
    "unknown key": (_set("extra", value=1), "'extra' is not part"),
    "no sidecar digest": (_drop("sidecar_sha256"), "'sidecar_sha256' is missing"),
    "no name": (_drop("name"), "'name' is missing"),
    "an older version": (_set("export_version", value=1), "'export_version' is 1"),
    "another device": (_set("device", value="tpu"), "'device' must be one of"),
    "a digest that is no digest": (_set("library_sha256", value="xyz"), "'library_sha256' has the wrong form"),
    "library bytes as text": (_set("library_bytes", value="12"), "'library_bytes' must be an int"),
    "params not a list": (_set("signature", "params", value={}), "'signature.params' must be a non-empty list"),
    "a shape that is code": (_set("signature", "params", 0, "shape", value=["__import__('os')"]),
                             r"'signature.params\[0\].shape\[0\]' is not a shape expression"),
    "a param without a role": (lambda m: m["signature"]["params"][0].pop("role"),
                               r"'signature.params\[0\].role' is missing"),
    "an axis naming no param": (lambda m: m["signature"]["axes"][1].__setitem__("indptr", "nope"),
                                r"'signature.axes\[1\].indptr' must be one of"),
    "sizes not ints": (_set("kernel", "sizes", "m", value=-3), "'kernel.sizes.m' must be an int >= 0"),
    "an input that is no param": (_set("kernel", "spec", "inputs", value=["Z"]), r"'kernel.spec.inputs\[0\]'"),
    "no spec": (lambda m: m["kernel"].pop("spec"), "'kernel.spec' is missing"),
    "kernel not an object": (_set("kernel", value=[1]), "'kernel' must be an object"),
}


@pytest.mark.parametrize("case", sorted(SCHEMA_EDITS))
def test_every_field_is_checked_against_the_schema(exported, tmp_path, case):
    edit, match = SCHEMA_EDITS[case]
    path = copy_export(exported, tmp_path)
    manifest = manifest_of(path)
    edit(manifest)
    write_manifest(path, manifest, reseal=True)
    with pytest.raises(ValueError, match=match) as error:
        runtime.load(path)
    assert "spmm.so.json" in str(error.value)


def test_an_attention_export_without_its_layout_is_refused(tmp_path):
    import hashlib

    path = compile_sparse_attention(np.array([[True, False], [True, True]]), 8, block=16).export(tmp_path / "a.so")
    npz = Path(str(path) + ".npz")
    with np.load(npz) as arrays:
        kept = {name: arrays[name] for name in arrays.files if name != "__layout"}
    np.savez(npz, **kept)
    manifest = manifest_of(path)
    manifest["sidecar_sha256"] = hashlib.sha256(npz.read_bytes()).hexdigest()
    write_manifest(path, manifest, reseal=True)
    with pytest.raises(ValueError, match="lacks __layout"):
        runtime.load(path)
