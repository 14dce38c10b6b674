"""Each baseline says whether it can run, and why not, on this machine (no GPU, torch 2.13)."""

import sys

import pytest

from baselines import cupy_sparse, dense, dgl_import, dgl_ops, pyg, scipy_sparse, torch_sparse

MODULES = [scipy_sparse, torch_sparse, dense, pyg, dgl_ops, cupy_sparse]


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
@pytest.mark.parametrize("op", ["spmm", "sddmm"])
def test_available_answers_a_bool_and_a_reason(module, op):
    ok, reason = module.available(op)
    assert isinstance(ok, bool) and isinstance(reason, str) and reason


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_unknown_op_is_a_value_error(module):
    with pytest.raises(ValueError, match="unknown op"):
        module.available("spgemm")


def test_gpu_baselines_say_why_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    ok, reason = cupy_sparse.available("spmm")
    assert not ok and ("cupy" in reason)
    ok, reason = torch_sparse.available("spmm", "cuda")
    assert not ok and "no CUDA GPU" in reason
    assert scipy_sparse.available("spmm", "cuda") == (False, "scipy runs on the CPU only, not on 'cuda'")
    with pytest.raises(RuntimeError, match="cupy"):
        cupy_sparse.spmm(None, None)


def test_libraries_without_an_sddmm_say_so():
    for module in (pyg, dense, cupy_sparse):
        ok, reason = module.available("sddmm")
        assert not ok and ("SDDMM" in reason or "cupy" in reason)
        assert module.SDDMM_VARIANTS == {}


def test_dgl_imports_through_the_shim_under_this_torch():
    dgl, reason = dgl_import.import_dgl()
    if dgl is None:
        assert reason.startswith(("dgl is not installed", "dgl does not import"))
        pytest.skip(reason)
    assert "dgl.ops" in sys.modules
    stand_in = sys.modules["dgl.graphbolt"]
    if isinstance(stand_in, dgl_import._MissingGraphbolt):
        with pytest.raises(AttributeError, match="baselines.dgl_import replaced it"):
            stand_in.load_from_shared_memory  # noqa: B018 - the attribute access is the test
    ok, reason = dgl_ops.available("sddmm")
    assert ok and reason.startswith("dgl 2.")
