"""Every R-GCN baseline computes the reference model with the same weights, or says why it cannot."""

import numpy as np
import pytest

import baselines
from baselines import dgl
from sparsetir.data import RelationalGraph
from sparsetir.formats.relational import read_relational_input
from sparsetir.reference.rgcn import rgcn_inputs, rgcn_reference

VARIANTS = list(baselines.variants("rgcn"))


def _build(name: str, inputs):
    entry = baselines.baseline("rgcn", name)
    ok, reason = entry.available()
    assert isinstance(ok, bool) and isinstance(reason, str) and reason
    if not ok:
        pytest.skip(reason)
    return entry.build(inputs)


def _assert_matches(run, case):
    inputs, expected, tolerance = case
    for _ in range(2):  # a second call must not accumulate into the first result
        got = run()
        assert got.shape == expected.shape
        excess = np.abs(got.numpy().astype(np.float64) - expected) - tolerance
        assert (excess <= 0).all(), f"worst excess {excess.max():.3g} at {np.unravel_index(excess.argmax(), got.shape)}"


@pytest.fixture(scope="module")
def small_inputs():
    """60 entities, 4 relations (the last without edges), isolated entities, duplicate triples,
    and feature sizes 8 -> 6 -> 5 (so a transposed weight cannot pass)."""
    rng = np.random.default_rng(7)
    edges = 400
    subjects, objects = rng.integers(0, 50, edges), rng.integers(0, 50, edges)  # 50..59 are isolated
    predicates = rng.integers(0, 3, edges)
    graph = RelationalGraph(60, ("a", "b", "c", "empty"), np.concatenate([subjects, subjects[:20]]),
                            np.concatenate([predicates, predicates[:20]]), np.concatenate([objects, objects[:20]]))
    inputs = rgcn_inputs(read_relational_input(graph), (8, 6, 5), seed=3)
    return (inputs, *rgcn_reference(inputs))


@pytest.fixture(scope="module")
def aifb_inputs():
    """AIFB (embedded in data/, and in the mirror), dims 32 -> 32 -> 32 as in the paper."""
    from sparsetir.data import load_relational

    graph = read_relational_input(load_relational("aifb"))
    inputs = rgcn_inputs(graph, (32, 32, 32), seed=0)
    return (inputs, *rgcn_reference(inputs))


@pytest.mark.parametrize("name", [n for n in VARIANTS if n != "graphiler"])
def test_baseline_equals_the_reference_on_a_small_relational_graph(name, small_inputs):
    _assert_matches(_build(name, small_inputs[0]), small_inputs)


@pytest.mark.slow  # a real graph: the reference and each library's model on 29k edges, a few seconds each
@pytest.mark.parametrize("name", [n for n in VARIANTS if n != "graphiler"])
def test_baseline_equals_the_reference_on_aifb(name, aifb_inputs):
    _assert_matches(_build(name, aifb_inputs[0]), aifb_inputs)


def test_graphiler_is_an_unavailable_contender_that_says_why(small_inputs):
    entry = baselines.baseline("rgcn", "graphiler")
    ok, reason = entry.available()
    assert not ok and "Graphiler" in reason and "wheel" in reason
    with pytest.raises(RuntimeError, match="Graphiler"):
        entry.build(small_inputs[0])


def test_the_paper_baselines_are_the_rgcn_library_references():
    assert set(baselines.library_references("rgcn")) == set(VARIANTS) - {"graphiler"}


def test_availability_answers_a_bool_and_a_reason_for_every_variant():
    for name in VARIANTS:
        ok, reason = baselines.baseline("rgcn", name).available("cpu")
        assert isinstance(ok, bool) and reason


def test_unknown_variants_are_value_errors():
    with pytest.raises(ValueError, match="unknown rgcn baseline 'pyg-nosuchconv'"):
        baselines.baseline("rgcn", "pyg-nosuchconv")


def test_without_a_gpu_every_variant_says_why():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    for name in VARIANTS:
        ok, reason = baselines.baseline("rgcn", name).available("cuda")
        assert not ok and ("no CUDA GPU" in reason or "Graphiler" in reason), (name, reason)


def test_dgl_says_exactly_why_when_it_cannot_run(monkeypatch):
    monkeypatch.setattr(dgl, "import_dgl", lambda: (None, "dgl is not installed (test)"))
    assert baselines.baseline("rgcn", "dgl-relgraphconv").available() == (False, "dgl is not installed (test)")
    with pytest.raises(RuntimeError, match="dgl is not installed"):
        dgl.relgraphconv(None)


def test_the_dgl_training_model_names_pyg_parameters_as_its_layers_do():
    # the featureless first layer is ours (PyG's names); the second is RelGraphConv (DGL's)
    name = dgl.DglRGCNTraining.parameter_name
    assert [name(f"convs.0.{key}") for key in ("weight", "comp", "root", "bias")] == [
        "convs.0.weight", "convs.0.comp", "convs.0.root", "convs.0.bias"]
    assert [name(f"convs.1.{key}") for key in ("weight", "comp", "root", "bias")] == [
        "convs.1.linear_r.W", "convs.1.linear_r.coeff", "convs.1.loop_weight", "convs.1.h_bias"]
    with pytest.raises(KeyError):
        name("convs.1.lin.weight")  # a GAT key is not an R-GCN parameter
