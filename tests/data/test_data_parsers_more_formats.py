"""Parsers for METIS, N-Triples, KITTI scans, OGB / DGL archives, and the seeded generators."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir import data

FIXTURES = Path(__file__).parent / "fixtures"
TINY_EDGES = {(0, 1), (0, 2), (0, 3), (1, 2), (2, 3), (3, 4)}


def _dense_tiny(weights=None):
    dense = np.zeros((5, 5), np.float32)
    for i, j in sorted(TINY_EDGES):
        dense[i, j] = dense[j, i] = 1 if weights is None else weights[(i, j)]
    return dense


def test_metis_hand_written_graph():
    matrix = data.read_metis(FIXTURES / "tiny.graph")
    assert matrix.shape == (5, 5) and matrix.nnz == 12
    np.testing.assert_array_equal(matrix.toarray(), _dense_tiny())


def test_metis_with_vertex_and_edge_weights():
    matrix = data.read_metis(FIXTURES / "tiny-weighted.graph")
    weights = {(0, 1): 10, (0, 2): 20, (0, 3): 30, (1, 2): 40, (2, 3): 50, (3, 4): 60}
    np.testing.assert_array_equal(matrix.toarray(), _dense_tiny(weights))


@pytest.mark.parametrize("text,message", [
    ("5 7\n2 3 4\n1 3\n1 2 4\n1 3 5\n4\n", "says 7 edges"),
    ("5 6\n2 3 4\n1 3\n1 2 4\n1 3 9\n4\n", r"neighbour ids must lie in 1\.\.5"),
    ("5 6\n2 3 4\n1 3\n", "5 vertices but 2 adjacency lines"),
    ("5 6 2\n", "digits 0 and 1"),
    ("% only a comment\n", "empty METIS file"),
])
def test_metis_malformed(tmp_path, text, message):
    path = tmp_path / "bad.graph"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        data.read_metis(path)


@pytest.mark.parametrize("name,entities,triples,relations", [
    ("aifb", 8285, 29043, 45), ("mutag", 23644, 74227, 23),
])
def test_ntriples_on_the_real_rgcn_graphs(real_data, name, entities, triples, relations):
    real_data(name)
    graph = data.load_relational(name)
    assert (graph.num_entities, graph.num_edges, len(graph.relations)) == (entities, triples, relations)
    merged = data.load(name)
    assert merged.shape == (entities, entities)
    per_relation = sum(graph.relation_adjacency(r).nnz for r in range(len(graph.relations)))
    assert per_relation >= merged.nnz  # relations may share an (s, o) pair


def test_ntriples_terms_literals_and_blank_nodes(tmp_path):
    path = tmp_path / "g.nt.gz"
    text = (
        '<http://x/a> <http://p/knows> <http://x/b> .\n'
        '# a comment\n'
        '_:b0 <http://p/knows> <http://x/a> .\n'
        '<http://x/a> <http://p/name> "Alice \\"A\\" Smith"@en .\n'
        '<http://x/b> <http://p/age> "42"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
    )
    path.write_bytes(gzip.compress(text.encode()))
    graph = data.read_ntriples(path)
    assert graph.num_entities == 5 and graph.num_edges == 4
    assert graph.relations == ("<http://p/age>", "<http://p/knows>", "<http://p/name>")
    assert sorted(graph.predicates.tolist()) == [0, 1, 1, 2]


def test_ntriples_malformed_line_names_it(tmp_path):
    path = tmp_path / "bad.nt"
    path.write_text("<a> <p> <b> .\n<a> <p>\n")
    with pytest.raises(ValueError, match=r"bad\.nt:2: not an N-Triples statement"):
        data.read_ntriples(path)


def test_ntriples_member_of_a_tgz(tmp_path):
    archive = tmp_path / "tiny.tgz"
    payload = gzip.compress(b"<a> <p> <b> .\n<b> <q> <c> .\n")
    with tarfile.open(archive, "w:gz") as handle:
        info = tarfile.TarInfo("tiny_stripped.nt.gz")
        info.size = len(payload)
        handle.addfile(info, io.BytesIO(payload))
    graph = data.read_ntriples_member(archive, "tiny_stripped.nt.gz")
    assert graph.num_entities == 3 and graph.num_edges == 2


@pytest.mark.parametrize("name,points", [("kitti-000000", 115384), ("kitti-000001", 120268)])
def test_kitti_scans(real_data, name, points):
    real_data(name)
    cloud = data.load(name)
    assert cloud.shape == (points, 4) and cloud.dtype == np.float32
    assert np.abs(cloud[:, :3]).max() < 200  # metres around the car
    assert 0 <= cloud[:, 3].min() and cloud[:, 3].max() <= 1  # reflectance


def test_kitti_truncated_scan(tmp_path):
    path = tmp_path / "000000.bin"
    path.write_bytes(np.zeros(10, np.float32).tobytes()[:-2])
    with pytest.raises(ValueError, match="not a whole number of points"):
        data.read_kitti_bin(path)


def _csv_gz(rows) -> bytes:
    return gzip.compress("".join(line + "\n" for line in rows).encode())


def test_ogb_node_property_archive(tmp_path):
    archive = tmp_path / "arxiv.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("arxiv/raw/edge.csv.gz", _csv_gz(["0,1", "1,2", "3,0"]))
        handle.writestr("arxiv/raw/num-node-list.csv.gz", _csv_gz(["4"]))
    matrix = data.read_ogb_edge_archive(archive, "arxiv")
    assert matrix.shape == (4, 4)
    assert sorted(zip(*matrix.nonzero())) == [(0, 1), (1, 2), (3, 0)]


def test_ogb_knowledge_graph_archive(tmp_path):
    archive = tmp_path / "biokg.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("biokg/raw/num-node-dict.csv.gz", _csv_gz(["disease,drug", "2,3"]))
        handle.writestr("biokg/raw/relations/drug___treats___disease/edge.csv.gz", _csv_gz(["0,1", "2,0"]))
        handle.writestr("biokg/raw/relations/disease___causes___disease/edge.csv.gz", _csv_gz(["1,0"]))
    graph = data.read_ogb_knowledge_graph(archive)
    assert graph.num_entities == 5 and graph.relations == ("disease___causes___disease", "drug___treats___disease")
    triples = sorted(zip(graph.subjects.tolist(), graph.predicates.tolist(), graph.objects.tolist()))
    assert triples == [(1, 0, 0), (2, 1, 1), (4, 1, 0)]  # drugs are ids 2..4, after the 2 diseases


def test_reddit_style_scipy_npz_member(tmp_path):
    matrix = sp.random(6, 6, density=0.4, format="coo", dtype=np.float32, random_state=1)
    buffer = io.BytesIO()
    sp.save_npz(buffer, matrix)
    archive = tmp_path / "reddit.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("reddit_graph.npz", buffer.getvalue())
    got = data.read_scipy_npz_member(archive, "reddit_graph.npz")
    np.testing.assert_array_equal(got.toarray(), matrix.toarray())


def test_ppi_style_node_link_splits(tmp_path):
    archive = tmp_path / "ppi.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for split, links in (("train", [(0, 1), (1, 2)]), ("valid", [(1, 0)]), ("test", [(0, 0)])):
            nodes = 3 if split == "train" else 2
            document = {"directed": True, "nodes": [{"id": i} for i in range(nodes)],
                        "links": [{"source": s, "target": t} for s, t in links]}
            handle.writestr(f"ppi/{split}_graph.json", json.dumps(document))
    matrix = data.read_node_link_splits(archive)
    assert matrix.shape == (7, 7)
    assert sorted(zip(*matrix.nonzero())) == [(0, 1), (1, 2), (4, 3), (5, 5)]


def test_archive_member_must_be_unique(tmp_path):
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("x/edge.csv.gz", b"")
        handle.writestr("y/edge.csv.gz", b"")
    with pytest.raises(ValueError, match="expected one member named 'edge.csv.gz'.*found 2 members"):
        with data.open_member(archive, "edge.csv.gz"):
            pass


def test_generators_are_seeded_and_shaped():
    first, again, other = data.generate("rmat:10:8", seed=1), data.generate("rmat:10:8", seed=1), data.generate("rmat:10:8", seed=2)
    assert first.shape == (1024, 1024) and (first != again).nnz == 0 and (first != other).nnz > 0
    assert (first != first.T).nnz == 0
    degrees = np.diff(data.generate("powerlaw:20000:8:2.2").indptr)
    assert degrees.max() > 20 * degrees.mean()  # a heavy tail, unlike a uniform random graph
    uniform = data.generate("synthetic:300x200:0.05")
    assert uniform.shape == (300, 200) and 2800 <= uniform.nnz <= 3000


@pytest.mark.parametrize("spec", ["rmat:0:4", "rmat:10", "powerlaw:100:4:1.5", "synthetic:3x:0.1", "grid:4"])
def test_bad_generator_specs(spec):
    with pytest.raises(ValueError, match="generator spec"):
        data.generate(spec)
