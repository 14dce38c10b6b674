"""runtime.load of a tampered or damaged export never crashes and never answers wrongly: the
manifest records the sha256 of the library and of the structure sidecar, and the structure is
validated again as a compiled function validates its inputs (item 1). Tampering that keeps the
digests consistent (an attacker rewriting the manifest too) is caught by the validation alone."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparsetir.runtime as runtime
from sparsetir.ops import compile_sddmm, compile_spmm
from sparsetir.runtime.manifest import seal

A = sp.random(40, 30, density=0.2, format="csr", dtype=np.float32, random_state=0)
B = np.random.default_rng(0).standard_normal((30, 8)).astype(np.float32)


@pytest.fixture(scope="module", params=["csr", "hyb:2:1,2,4", "ell:2"])
def exported(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param.replace(":", "-")) / "spmm.so"
    compile_spmm(A, 8, format=request.param).export(path)
    return path


def sidecar_arrays(path: Path) -> dict:
    with np.load(str(path) + ".npz") as loaded:
        return {name: loaded[name] for name in loaded.files}


def rewrite(path: Path, arrays: dict, *, refresh_digest: bool) -> None:
    np.savez(str(path) + ".npz", **arrays)
    if refresh_digest:  # the manifest rewritten too: only the validation stands in the way
        manifest = json.loads(Path(str(path) + ".json").read_text())
        manifest["sidecar_sha256"] = hashlib.sha256(Path(str(path) + ".npz").read_bytes()).hexdigest()
        Path(str(path) + ".json").write_text(json.dumps(seal(manifest)))  # its own digest too


def copy_export(source: Path, target_dir: Path) -> Path:
    target = target_dir / source.name
    for suffix in ("", ".json", ".npz", ".ll", ".cu"):
        if Path(str(source) + suffix).exists():
            Path(str(target) + suffix).write_bytes(Path(str(source) + suffix).read_bytes())
    return target


def test_an_untouched_export_loads_and_equals_the_kernel(exported):
    np.testing.assert_allclose(runtime.load(exported)(B), A @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("edit", ["index 1e8", "index -1e8", "indptr past nnz", "decreasing indptr", "in range"])
def test_an_edited_sidecar_is_refused_by_its_digest(exported, tmp_path, edit):
    path = copy_export(exported, tmp_path)
    arrays = sidecar_arrays(path)
    name = next(n for n in arrays if n.endswith("indices") and arrays[n].size)
    if edit == "index 1e8":
        arrays[name][0] = 10**8
    elif edit == "index -1e8":
        arrays[name][0] = -(10**8)
    elif edit == "in range":
        arrays[name][0] = (arrays[name][0] + 1) % 30
    else:
        pointer = next((n for n in arrays if n.endswith("indptr")), None)
        if pointer is None:
            pytest.skip("this format has no indptr")
        arrays[pointer][1] = arrays[pointer][-1] + 5 if edit == "indptr past nnz" else -1
    rewrite(path, arrays, refresh_digest=False)
    with pytest.raises(ValueError, match="does not match the sha256"):
        runtime.load(path)


@pytest.mark.parametrize("edit", ["index 1e8", "index -1e8", "indptr past nnz", "decreasing indptr"])
def test_an_edited_sidecar_with_a_matching_digest_is_refused_by_validation(exported, tmp_path, edit):
    path = copy_export(exported, tmp_path)
    arrays = sidecar_arrays(path)
    name = next(n for n in arrays if n.endswith("indices") and arrays[n].size)
    pointer = next((n for n in arrays if n.endswith("indptr")), None)
    if edit.startswith("index"):
        arrays[name][0] = 10**8 if edit == "index 1e8" else -(10**8)
    elif pointer is None:
        pytest.skip("this format has no indptr")
    elif edit == "indptr past nnz":
        arrays[pointer][-1] += 5
    else:
        arrays[pointer][1] = arrays[pointer][2] + 1 if arrays[pointer].size > 2 else -1
    rewrite(path, arrays, refresh_digest=True)
    with pytest.raises(ValueError):
        runtime.load(path)


def test_a_changed_library_is_refused(exported, tmp_path):
    path = copy_export(exported, tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256 its manifest records for the library"):
        runtime.load(path)


def test_an_sddmm_export_is_validated_too(tmp_path):
    path = compile_sddmm(A, 8).export(tmp_path / "sddmm.so")
    arrays = sidecar_arrays(path)
    arrays["J_indices"][3] = 10**8
    rewrite(path, arrays, refresh_digest=True)
    with pytest.raises(ValueError, match="J_indices"):
        runtime.load(path)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_tampering_never_loads_a_kernel_that_answers_wrongly(exported, tmp_path_factory, data):
    """Any array, any dtype change or entry edit, digest refreshed: either a clear error at load,
    or a kernel whose result is what its (edited) structure means."""
    path = copy_export(exported, tmp_path_factory.mktemp("tamper"))
    arrays = sidecar_arrays(path)
    name = data.draw(st.sampled_from(sorted(arrays)))
    array = arrays[name]
    kind = data.draw(st.sampled_from(["entry", "dtype", "shape"]))
    if kind == "entry" and array.size:
        at = data.draw(st.integers(0, array.size - 1))
        array.reshape(-1)[at] = data.draw(st.sampled_from([-(2**31), -2, -1, 0, 1, 7, 10**6, 2**31 - 1]))
    elif kind == "dtype":
        array = array.astype(data.draw(st.sampled_from([np.int64, np.float64, np.int16, np.uint32])))
    else:
        array = array.reshape(-1)[: max(array.size - 1, 0)]
    arrays[name] = array
    rewrite(path, arrays, refresh_digest=True)
    try:
        kernel = runtime.load(path)
    except (ValueError, TypeError):
        return
    result = kernel(B)
    assert np.isfinite(result).all()


@pytest.mark.slow
def test_tampered_exports_fail_cleanly_in_a_fresh_process(exported, tmp_path):
    """The cases that crashed the process before: a clear ValueError, exit 0."""
    path = copy_export(exported, tmp_path)
    arrays = sidecar_arrays(path)
    name = next(n for n in arrays if n.endswith("indices") and arrays[n].size)
    arrays[name][0] = 10**8
    rewrite(path, arrays, refresh_digest=True)
    script = textwrap.dedent(f"""
        import numpy as np, sparsetir.runtime as runtime
        try:
            runtime.load({str(path)!r})(np.ones((30, 8), np.float32))
        except ValueError as error:
            print("refused:", error)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "refused:" in result.stdout
