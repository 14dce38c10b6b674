"""sparsetir.data.load_entities: AIFB and MUTAG as PyG's Entities builds them (every triple and its
inverse, twice the predicates as relations, the R-GCN paper's train/test split), verified files,
clear errors for a split that names an unknown entity."""

from __future__ import annotations

import numpy as np
import pytest

from sparsetir.data.entities import _read_split, entity_tasks, load_entities


@pytest.mark.parametrize("name, nodes, relations, edges, train, test, classes", [
    ("aifb", 8285, 90, 58086, 140, 36, 4),  # PyG's Entities("AIFB"): the same counts
    ("mutag", 23644, 46, 148454, 272, 68, 2),
])
def test_the_tasks_have_pyg_entities_sizes(name, nodes, relations, edges, train, test, classes):
    task = load_entities(name)
    assert (task.num_nodes, task.num_relations, task.edge_index.shape) == (nodes, relations, (2, edges))
    assert (task.train_idx.size, task.test_idx.size, task.num_classes) == (train, test, classes)
    half = edges // 2  # the inverse of edge k (type 2p) is edge half + k (type 2p + 1)
    np.testing.assert_array_equal(task.edge_index[:, half:], task.edge_index[::-1, :half])
    np.testing.assert_array_equal(task.edge_type[half:], task.edge_type[:half] + 1)
    assert task.edge_type.min() == 0 and task.edge_type.max() == relations - 1
    assert not set(task.train_idx) & set(task.test_idx)
    assert not task.edge_index.flags.writeable


def test_unknown_task_and_unknown_entity(tmp_path):
    assert entity_tasks() == ["aifb", "mutag"]
    with pytest.raises(KeyError, match="known: aifb, mutag"):
        load_entities("bgs")
    split = tmp_path / "split.tsv"
    split.write_text("person\tid\tlabel\nhttp://example.org/a\t1\tx\nhttp://example.org/b\t2\ty\n")
    assert _read_split(split, {"<http://example.org/a>": 3, "<http://example.org/b>": 5}) == ([3, 5], ["x", "y"])
    with pytest.raises(ValueError, match=r"split.tsv:3: entity 'http://example.org/b' is not in the graph"):
        _read_split(split, {"<http://example.org/a>": 3})
