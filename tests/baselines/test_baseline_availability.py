"""Each library declares what it computes, and each variant says whether it can run, and why not, on this
machine (no GPU, torch 2.13); optional libraries are probed once."""

import sys

import pytest

import baselines
from baselines import dgl, pyg

KEYS = baselines.keys()
EVERY = [(key, name) for key in KEYS for name in baselines.variants(key)]


@pytest.mark.parametrize("key,name", EVERY, ids=[f"{key}:{name}" for key, name in EVERY])
def test_every_variant_answers_a_bool_and_a_reason_on_each_device(key, name):
    for device in ("cpu", "cuda"):
        ok, reason = baselines.availability(baselines.baseline(key, name), device)
        assert isinstance(ok, bool) and isinstance(reason, str) and reason


def test_every_library_module_declares_variants_and_a_name_belongs_to_one_library():
    assert {"scipy_sparse", "torch_sparse", "pyg", "dgl", "spconv", "graphiler"} <= set(baselines.library_names())
    owners = {}
    for key in KEYS:
        for name, entry in baselines.variants(key).items():
            assert isinstance(entry.variant, baselines.Variant)
            assert owners.setdefault(name, entry.library) == entry.library, name
    assert set(owners.values()) == set(baselines.library_names())  # no module declares nothing


def test_unknown_names_are_value_errors_that_list_the_known_ones():
    with pytest.raises(ValueError, match="unknown spmm baseline 'mkl'; known: .*scipy"):
        baselines.variants("spmm", ["mkl"])
    with pytest.raises(ValueError, match="unknown sddmm baseline 'pyg-spmm'"):
        baselines.baseline("sddmm", "pyg-spmm")
    with pytest.raises(ValueError, match="unknown baseline library"):
        baselines.library("mkl")
    with pytest.raises(ValueError, match="unknown device"):
        baselines.availability(baselines.baseline("spmm", "scipy"), "tpu")


def test_a_library_name_stands_for_its_variants_of_the_op():
    assert list(baselines.variants("spmm", ["torch_sparse"])) == ["torch-csr-i64", "torch-csr-i32", "torch-reduce-sum"]
    assert list(baselines.variants("sddmm", ["scipy_sparse", "dgl"])) == ["scipy", "dgl-gsddmm"]


def test_references_and_defaults_are_derived_from_the_declarations():
    assert set(baselines.library_references("sddmm")) == {"scipy", "torch-sampled-addmm", "dgl-gsddmm"}
    assert baselines.device_references("sddmm") == {"cpu": "torch-sampled-addmm", "cuda": "torch-sampled-addmm"}
    assert baselines.device_references("spmm") == {"cuda": "torch-csr-i32"}
    assert "torch-dense" not in baselines.library_references("spmm")
    assert "sdpa-dense" not in baselines.default_names("sparse_attention")  # opt in: it computes something else
    assert "triton-blocksparse" in baselines.default_names("sparse_attention", "cuda")
    assert "triton-blocksparse" not in baselines.default_names("sparse_attention", "cpu")


def test_gpu_baselines_say_why_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    cupy = baselines.baseline("spmm", "cupy-cusparse")
    ok, reason = cupy.available("cuda")
    assert not ok and "cupy" in reason
    ok, reason = baselines.baseline("spmm", "torch-csr-i32").available("cuda")
    assert not ok and "no CUDA GPU" in reason
    assert baselines.baseline("spmm", "scipy").available("cuda") == (False, "scipy runs on cpu, not on 'cuda'")
    with pytest.raises(RuntimeError, match="cupy"):
        cupy.build(None, None, device="cuda")


def test_libraries_without_an_sddmm_declare_none():
    assert set(baselines.libraries_of("sddmm")) == {"scipy_sparse", "torch_sparse", "dgl"}


def test_an_optional_library_is_probed_once():
    pyg.probe.cache_clear()
    for name in ("pyg-spmm", "pyg-edgeindex", "pyg-rgcnconv"):
        for key in ("spmm", "rgcn"):
            if name in baselines.variants(key):
                baselines.baseline(key, name).available()
    assert pyg.probe.cache_info().misses == 1 and pyg.probe.cache_info().hits >= 2


def test_never_installable_libraries_have_rows_that_say_why():
    for key, name, word in (("rgcn", "graphiler", "Graphiler"), ("conv", "torchsparse", "TorchSparse"),
                            ("conv", "minkowskiengine", "MinkowskiEngine")):
        entry = baselines.baseline(key, name)
        ok, reason = entry.available()
        assert not ok and word in reason and ("wheel" in reason or "PyPI" in reason)
        with pytest.raises(RuntimeError, match=word):
            entry.build(None)


def test_dgl_imports_through_the_shim_under_this_torch():
    module, reason = dgl.import_dgl()
    if module is None:
        assert reason.startswith(("dgl is not installed", "dgl does not import"))
        pytest.skip(reason)
    assert "dgl.ops" in sys.modules
    stand_in = sys.modules["dgl.graphbolt"]
    if isinstance(stand_in, dgl._MissingGraphbolt):
        with pytest.raises(AttributeError, match="baselines.dgl replaced it"):
            stand_in.load_from_shared_memory  # noqa: B018 - the attribute access is the test
    ok, reason = baselines.baseline("sddmm", "dgl-gsddmm").available()
    assert ok and reason.startswith("dgl 2.")
