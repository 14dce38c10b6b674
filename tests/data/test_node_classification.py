"""Labelled graphs (features and labels) resolve and verify like every registry file; cora is embedded."""

from __future__ import annotations

import numpy as np
import pytest

from sparsetir.data import DatasetUnavailableError
from sparsetir.data.node_classification import labelled_graphs, load_node_classification


def test_cora_has_its_features_and_labels_without_a_mirror():
    cora = load_node_classification("cora")  # data/gnn-benchmark-npz/cora.npz, embedded
    assert cora.adjacency.shape == (2708, 2708) and cora.features.shape == (2708, 1433)
    assert cora.labels.shape == (2708,) and cora.num_classes == 7
    assert (cora.adjacency != cora.adjacency.T).nnz == 0 and set(np.unique(cora.adjacency.data)) == {1.0}
    assert cora.features.dtype == np.float32 and cora.features.has_canonical_format
    cora.labels[:] = 0  # a fresh copy: the next load is untouched
    assert load_node_classification("cora").labels.max() == 6


@pytest.mark.parametrize("name", ["amazon_photo", "dblp"])
def test_graphdata_graphs_read_their_pickled_features_through_the_safe_loader(name):
    try:
        graph = load_node_classification(name)
    except DatasetUnavailableError as error:
        pytest.skip(f"no mirror here: {error}")
    n = graph.adjacency.shape[0]
    assert graph.features.shape[0] == n and graph.labels.shape == (n,) and graph.num_classes >= 2


def test_an_unknown_name_lists_the_labelled_graphs():
    with pytest.raises(KeyError, match="labelled graphs: cora, citeseer"):
        load_node_classification("pubmed")
    assert {"cora", "citeseer", "amazon_cs", "coauthor_cs"} <= set(labelled_graphs())
