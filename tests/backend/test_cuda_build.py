"""CUDA build tooling: the driver stub, the nvcc-backed build in a child process, and its fatbin.

The kernel is the project's CSR SpMM, ``spmm_function(CSR(), 64)`` scheduled by the CUDA template
(a warp per row; built in ``tests/helpers/cuda_kernels.py``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tvm
from cuda_kernels import SPMM_FUNC, SPMM_KERNEL, spmm_module, unscheduled_spmm_module

from sparsetir.backend import cuda_stub
from sparsetir.backend.cuda import build_cuda, cuda_source, nvcc_available
from sparsetir.backend.fatbin import fatbin_entries

NVCC_OK, NVCC_REASON = nvcc_available()
needs_nvcc = pytest.mark.skipif(not NVCC_OK, reason=f"needs nvcc: {NVCC_REASON}")
TVM_LIB = Path(tvm.__file__).parent / "lib"


@pytest.fixture(scope="module")
def spmm_build(tmp_path_factory):
    return build_cuda(spmm_module(), tmp_path_factory.mktemp("cuda"), name=SPMM_FUNC)


def test_stub_defines_exactly_the_driver_symbols_tvm_cuda_runtime_imports():
    if shutil.which("nm") is None:
        pytest.skip("needs nm (binutils)")
    needed = subprocess.run(
        ["nm", "-D", "--undefined-only", str(TVM_LIB / "libtvm_runtime_cuda.so")], capture_output=True, text=True
    ).stdout
    needed = {name for name in re.findall(r"\bU (cu[A-Z]\w*)$", needed, flags=re.M)}
    defined = subprocess.run(
        ["nm", "-D", "--defined-only", str(cuda_stub.stub_path())], capture_output=True, text=True
    ).stdout
    defined = {name for name in re.findall(r"\bT (cu[A-Z]\w*)$", defined, flags=re.M)}
    assert needed and defined == needed


def test_stub_is_built_once_per_source_version(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSETIR_CACHE_DIR", str(tmp_path))
    first = cuda_stub.stub_path()
    mtime = first.stat().st_mtime_ns
    assert first.is_relative_to(tmp_path / "cudastub") and first.name == "libcuda.so.1"
    assert cuda_stub.stub_path() == first and first.stat().st_mtime_ns == mtime
    soname = subprocess.run(["readelf", "-d", str(first)], capture_output=True, text=True).stdout
    assert "libcuda.so.1" in soname


def test_a_loaded_stub_is_never_mistaken_for_the_real_driver():
    code = (
        "from sparsetir.backend import cuda_stub\n"
        "real = cuda_stub.real_libcuda_available()\n"
        "loaded = cuda_stub.preload_stub()\n"
        "assert (loaded is None) == real, (real, loaded)\n"
        "assert cuda_stub.real_libcuda_available() == real\n"
        "print('real' if real else 'stub')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in {"real", "stub"}


@needs_nvcc
@pytest.mark.slow
def test_build_embeds_sass_for_sm90_and_sm80_plus_ptx(spmm_build):
    kinds = [(e.kind, e.arch) for e in spmm_build.fatbin_entries]
    assert ("ELF", "sm_90") in kinds and ("ELF", "sm_80") in kinds and ("PTX", "sm_90") in kinds
    assert spmm_build.archs == ["sm_90", "sm_80"] and spmm_build.notes == []
    # what the record says is what is in the file
    assert fatbin_entries(spmm_build.so_path) == spmm_build.fatbin_entries
    assert all(e.size > 0 for e in spmm_build.fatbin_entries)


@needs_nvcc
@pytest.mark.slow
def test_build_writes_the_cuda_source_next_to_the_library(spmm_build):
    assert spmm_build.so_path.suffix == ".so" and spmm_build.so_path.is_file()
    assert spmm_build.source_path == spmm_build.so_path.with_suffix(".cu")
    assert 'extern "C" __global__' in spmm_build.source and SPMM_KERNEL in spmm_build.source
    # the in-process, nvcc-free generator yields the same kernel
    assert cuda_source(spmm_module()) == spmm_build.source


@needs_nvcc
@pytest.mark.slow
def test_library_loads_in_a_fresh_process_and_exposes_the_kernel(spmm_build):
    code = (
        "import sys\n"
        "from sparsetir.backend import cuda_stub\n"
        "cuda_stub.preload_stub()\n"
        "import tvm\n"
        "mod = tvm.runtime.load_module(sys.argv[1])\n"
        "assert mod.implements_function(sys.argv[2]), sys.argv[2] + ' missing'\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(spmm_build.so_path), SPMM_FUNC], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@needs_nvcc
@pytest.mark.slow
def test_an_arch_nvcc_cannot_target_is_dropped_and_named(tmp_path):
    result = build_cuda(spmm_module(), tmp_path, archs=("sm_90", "sm_52"), name="k")
    assert result.archs == ["sm_90"]
    assert any("sm_52" in note for note in result.notes)
    assert {(e.kind, e.arch) for e in result.fatbin_entries} == {("ELF", "sm_90"), ("PTX", "sm_90")}


@needs_nvcc
@pytest.mark.slow
def test_a_module_without_thread_bindings_fails_with_the_workers_reason(tmp_path):
    with pytest.raises(RuntimeError, match="no CUDA device code"):
        build_cuda(unscheduled_spmm_module(), tmp_path, name="unbound")


def test_missing_nvcc_is_a_clear_error(tmp_path, monkeypatch):
    import sparsetir.backend.cuda as cuda

    monkeypatch.setattr(cuda, "find_nvcc", lambda: None)
    assert cuda.nvcc_available()[0] is False
    with pytest.raises(RuntimeError, match="nvcc not found"):
        cuda.build_cuda(spmm_module(), tmp_path)


def test_bad_archs_are_rejected_before_building(tmp_path):
    with pytest.raises(ValueError, match="archs"):
        build_cuda(spmm_module(), tmp_path, archs=("compute_90",))


def test_when_a_secondary_arch_fails_the_primary_is_built_alone_and_the_reason_kept():
    from sparsetir.backend.cuda_worker import compile_with_fallback, gencode_flags

    calls = []

    def fake_nvcc(code, flags):
        calls.append(flags)
        if "arch=compute_80,code=sm_80" in flags:
            raise RuntimeError(code + "\nCompilation error:\nerror: feature needs sm_90")
        return b"fatbin"

    archs, notes = ["sm_90", "sm_80"], []
    binary, flags = compile_with_fallback("kernel code", archs, True, notes, fake_nvcc)
    assert binary == b"fatbin" and archs == ["sm_90"]
    assert flags == gencode_flags(["sm_90"], True) == ["-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
    assert len(calls) == 2 and "needs sm_90" in notes[0]
