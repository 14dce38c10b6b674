"""Where floats become integers, a result that cannot be represented is a ValueError (issue 27, items 4
and 5): voxelize on huge points or tiny voxels (it gave coordinates of -2**63), kernel_map on
coordinates past an int32 grid, the generators on infinite or huge arguments; a relational graph's
predicate out of [0, R) or an entity out of range names the field (numpy's error named none)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sparsetir import ops
from sparsetir.data import generators
from sparsetir.data.rdf_graph import RelationalGraph
from sparsetir.formats.relational import read_relational_input


@pytest.mark.parametrize(("points", "voxel"), [
    ([[1e19, 0, 0], [0, 0, 0]], 1.0),
    ([[1.0, 0, 0], [0, 0, 0]], 1e-300),
    ([[-1e300, 0, 0], [1e300, 0, 0]], 1.0),
    ([[3e9, 0, 0], [0, 0, 0]], 1.0),
])
def test_voxelize_refuses_coordinates_it_cannot_represent(points, voxel):
    with pytest.raises(ValueError, match="largest coordinate"):
        ops.voxelize(np.asarray(points, dtype=np.float64), voxel)


def test_voxelize_still_starts_coordinates_at_zero_near_the_limit():
    coords, _ = ops.voxelize(np.array([[2.0**31 - 1, 0, 0], [0.0, 5, 0]]), 1.0)
    assert coords.min() == 0 and coords[:, 1].max() == 2**31 - 1


@pytest.mark.parametrize("top", [2**31, 2**62, 2**63 - 1])
def test_kernel_map_refuses_coordinates_past_an_int32_grid(top):
    coords = np.array([[0, top, 0, 0], [0, 0, 0, 0]], dtype=np.int64)
    with pytest.raises(ValueError, match="must be <= 2147483647"):
        ops.kernel_map(coords)


@pytest.mark.parametrize(("call", "error"), [
    (lambda: generators.power_law(100, float("inf"), 3.0), "out of range"),
    (lambda: generators.power_law(100, 1e300, 3.0), "too large"),
    (lambda: generators.uniform(10**20, 5, 0.5), "too large"),
    (lambda: generators.uniform(10, 5, float("nan")), "out of range"),
    (lambda: generators.rmat(2.5, 3), "out of range"),
    (lambda: generators.generate("powerlaw:100:inf:3"), "out of range"),
    (lambda: generators.generate("powerlaw:100:1e300:3"), "too large"),
])
def test_generators_refuse_arguments_whose_counts_cannot_be_represented(call, error):
    with pytest.raises(ValueError, match=error):
        call()


def _graph(**fields):
    base = dict(num_entities=3, relations=("a", "b"), subjects=np.array([0, 1]), predicates=np.array([0, 1]),
                objects=np.array([1, 2]))
    return {**base, **fields}


@pytest.mark.parametrize(("fields", "match"), [
    ({"predicates": np.array([0, 2])}, r"predicates\[1\] = 2 is out of range: relation ids lie in \[0, 2\)"),
    ({"predicates": np.array([-1, 0])}, r"predicates\[0\] = -1"),
    ({"subjects": np.array([0, 3])}, r"subjects\[1\] = 3 is out of range: entity ids"),
    ({"objects": np.array([-5, 1])}, r"objects\[0\] = -5"),
    ({"objects": np.array([1])}, "one length"),
    ({"num_entities": -1}, "num_entities"),
])
def test_a_relational_graph_names_the_field_that_is_out_of_range(fields, match):
    with pytest.raises(ValueError, match=match):
        RelationalGraph(**_graph(**fields))
    with pytest.raises(ValueError, match=match.replace("num_entities", "range|num_entities")):
        read_relational_input(SimpleNamespace(**_graph(**fields)))  # an object with a graph's fields


def test_a_relational_graph_takes_lists_and_cannot_be_changed_after_its_check():
    graph = RelationalGraph(**_graph(subjects=[0, 1], predicates=[0, 1], objects=[1, 2]))
    assert graph.predicates.dtype == np.int64
    with pytest.raises(ValueError, match="read-only"):
        graph.predicates[0] = 5
    with pytest.raises(TypeError, match="integer ids"):
        RelationalGraph(**_graph(predicates=np.array([0.0, 1.5])))


def test_rgms_on_a_graph_with_a_bad_predicate_names_it_before_any_kernel():
    bad = SimpleNamespace(**_graph(predicates=np.array([0, 5])))
    X = np.ones((3, 4), np.float32)
    W = np.ones((2, 4, 4), np.float32)
    with pytest.raises(ValueError, match=r"predicates\[1\] = 5"):
        ops.rgms(bad, X, W)
    assert ops.rgms(RelationalGraph(**_graph()), X, W).shape == (3, 4)
