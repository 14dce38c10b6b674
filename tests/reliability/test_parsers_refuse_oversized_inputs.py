"""Parsers refuse an oversized input with a clear error before allocating for it.

Issue 13, item 8 (parsers): a 7 KB OGB zip expanded to >= 1.5 GB of CSV, a 160 KB Planetoid
pickle yielded 4e8 edges, and a declared shape of 3e9 tried to allocate 22 GB. Every parser now
takes ``max_nnz`` / ``max_bytes`` (defaults sized for a 24 GB machine) and checks declared
sizes first. Each refusal below must come fast and with little memory: it may not build first.
"""

from __future__ import annotations

import collections
import gzip
import io
import pickle
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparsetir import data
from sparsetir.data.size_limits import DEFAULT_MAX_NNZ, MAX_NNZ_ENV, DataTooLargeError, size_limits

HUGE = 3_000_000_000  # rows in a declared shape: an indptr of 24 GB


def _refused_quickly(call, match: str, *, peak_mb: float = 64):
    """``call()`` raises DataTooLargeError matching ``match`` within ``peak_mb`` of Python memory.

    Refusing before reading is what the memory peak shows; the time bound only catches a hang
    (a parser that reads 24 GB), generously enough to hold on a busy machine.
    """
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(DataTooLargeError, match=match) as info:
            call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 300, "took minutes: the parser read the input instead of refusing it"
    assert peak < peak_mb * 2**20, f"peaked at {peak / 2**20:.0f} MiB before refusing"
    assert isinstance(info.value, ValueError)
    return str(info.value)


def _ogb_zip(path, edge_csv_gz: bytes, nodes: int = 10):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("arxiv/raw/num-node-list.csv.gz", gzip.compress(f"{nodes}\n".encode()))
        archive.writestr("arxiv/raw/edge.csv.gz", edge_csv_gz)
    return path


def test_a_small_ogb_zip_that_expands_past_max_bytes_is_refused(tmp_path):
    bomb = gzip.compress(b"0,1\n" * 8_000_000, compresslevel=9)  # 32 MB of CSV
    archive = _ogb_zip(tmp_path / "arxiv.zip", bomb)
    assert archive.stat().st_size < 200_000
    message = _refused_quickly(lambda: data.read_ogb_edge_archive(archive, "arxiv", max_bytes=1 << 20),
                               r"decompressed bytes .* exceeds max_bytes=1,048,576")
    assert "edge.csv.gz" in message and "SPARSETIR_DATA_MAX_BYTES" in message


def test_an_ogb_graph_past_max_nnz_is_refused_before_its_edges_are_parsed(tmp_path):
    archive = _ogb_zip(tmp_path / "arxiv.zip", gzip.compress(b"0,1\n" * 1000))
    assert data.read_ogb_edge_archive(archive, "arxiv").nnz == 1
    _refused_quickly(lambda: data.read_ogb_edge_archive(archive, "arxiv", max_nnz=999), r"edges 1,000 exceeds max_nnz=999")
    huge_nodes = _ogb_zip(tmp_path / "nodes.zip", gzip.compress(b"0,1\n"), nodes=HUGE)
    _refused_quickly(lambda: data.read_ogb_edge_archive(huge_nodes, "arxiv"), r"rows 3,000,000,000 exceeds max_nnz")


def test_a_small_planetoid_pickle_that_repeats_one_list_into_4e8_edges_is_refused(tmp_path):
    neighbours = list(range(10_000))
    adjacency = collections.defaultdict(list, {node: neighbours for node in range(40_000)})  # one list, 40,000 times
    path = tmp_path / "ind.bomb.graph"
    path.write_bytes(pickle.dumps(adjacency, protocol=2))
    assert path.stat().st_size < 400_000
    assert 40_000 * 10_000 > DEFAULT_MAX_NNZ
    _refused_quickly(lambda: data.read_planetoid_graph(path), r"edges 400,000,000 exceeds max_nnz=250,000,000")


def _matrix_market(path, rows, cols, entries):
    path.write_text(f"%%MatrixMarket matrix coordinate real general\n{rows} {cols} {entries}\n1 1 1.0\n")
    return path


def _smtx(path, rows, cols, nnz):
    path.write_text(f"{rows}, {cols}, {nnz}\n0 1\n0\n")
    return path


def _metis(path, n, m):
    path.write_text(f"{n} {m}\n2\n1\n")
    return path


def _gnn_npz(path, rows, cols, nnz):
    np.savez(path, adj_data=np.ones(1, np.float32), adj_indices=np.zeros(1, np.int32),
             adj_indptr=np.array([0, 1], np.int64), adj_shape=np.array([rows, cols]))
    return path


def _scipy_npz(path, rows, cols, nnz):
    np.savez(path, format=np.array("csr"), shape=np.array([rows, cols]), data=np.ones(1, np.float32),
             indices=np.zeros(1, np.int32), indptr=np.array([0, 1], np.int64))
    return path


DECLARED = {
    "Matrix Market": (_matrix_market, data.read_matrix_market, "mtx"),
    "DLMC smtx": (_smtx, data.read_smtx, "smtx"),
    "METIS": (_metis, lambda path, **kw: data.read_metis(path, **kw), "graph"),
    "gnn-benchmark npz": (_gnn_npz, data.read_gnn_benchmark_npz, "npz"),
    "scipy npz": (_scipy_npz, data.read_scipy_npz, "npz"),
}


@pytest.mark.parametrize("kind", list(DECLARED))
def test_a_declared_shape_of_3e9_rows_is_refused_before_allocating(tmp_path, kind):
    write, read, suffix = DECLARED[kind]
    path = write(tmp_path / f"m.{suffix}", HUGE, HUGE, 1) if kind != "METIS" else write(tmp_path / "m.graph", HUGE, 1)
    _refused_quickly(lambda: read(path), r"rows 3,000,000,000 exceeds max_nnz=250,000,000")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["Matrix Market", "DLMC smtx", "METIS"]), entries=st.integers(1, 10**12),
       limit=st.integers(1, 10**9))
def test_declared_entries_are_held_to_max_nnz(tmp_path_factory, kind, entries, limit):
    write, read, suffix = DECLARED[kind]
    folder = tmp_path_factory.mktemp("declared")
    path = write(folder / f"m.{suffix}", 2, 2, entries) if kind != "METIS" else write(folder / "m.graph", 2, entries)
    declared = max(2, 2 * entries if kind == "METIS" else entries)  # the 2 x 2 shape counts too
    try:
        read(path, max_nnz=limit)
    except DataTooLargeError:
        assert declared > limit
    except ValueError:  # the tiny body does not match the header: a format error, after the size check passed
        assert declared <= limit
    else:
        assert declared <= limit


def test_a_file_past_max_bytes_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_bytes(b"0 1\n" * 1000)
    _refused_quickly(lambda: data.read_edge_list(path, max_bytes=100), r"file size \(bytes\) 4,000 exceeds max_bytes=100")


def test_a_npz_member_declaring_more_than_max_bytes_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.npz"
    np.savez_compressed(path, adj_data=np.ones(10_000_000, np.float32), adj_indices=np.zeros(10_000_000, np.int32),
                        adj_indptr=np.array([0, 10_000_000]), adj_shape=np.array([1, 1]))
    _refused_quickly(lambda: data.read_gnn_benchmark_npz(path, max_bytes=1 << 20), r"uncompressed bytes .* max_bytes")


def test_a_node_link_json_past_max_nnz_is_refused(tmp_path):
    archive = tmp_path / "ppi.zip"
    links = ",".join('{"source": 0, "target": 1}' for _ in range(50))
    document = '{"nodes": [{"id": 0}, {"id": 1}], "links": [' + links + "]}"
    with zipfile.ZipFile(archive, "w") as handle:
        for name in ("train_graph.json", "valid_graph.json", "test_graph.json"):
            handle.writestr(name, document)
    assert data.read_node_link_splits(archive).nnz == 3
    _refused_quickly(lambda: data.read_node_link_splits(archive, max_nnz=120), r"links \(all splits so far\) 150")


def test_n_triples_past_max_nnz_are_refused_while_streaming(tmp_path):
    path = tmp_path / "g.nt.gz"
    path.write_bytes(gzip.compress(b"<a> <p> <b> .\n" * 10_000))
    _refused_quickly(lambda: data.read_ntriples(path, max_nnz=500), r"triples \(at least\) 501")


def test_the_limits_come_from_the_environment_and_must_be_positive(monkeypatch):
    monkeypatch.setenv(MAX_NNZ_ENV, "1e3")
    assert size_limits().max_nnz == 1000
    assert size_limits(max_nnz=5).max_nnz == 5  # an argument wins
    monkeypatch.setenv(MAX_NNZ_ENV, "-1")
    with pytest.raises(ValueError, match=MAX_NNZ_ENV):
        size_limits()


def test_every_registered_graph_fits_the_default_limits():
    known = [data.entry(name).nnz for name in data.names() if data.entry(name).nnz is not None]
    assert max(known) < DEFAULT_MAX_NNZ
    assert 114_615_892 < DEFAULT_MAX_NNZ  # reddit, the largest download (shape unknown here), has 1.15e8 entries


def test_the_in_memory_reader_refuses_past_max_bytes():
    with pytest.raises(DataTooLargeError, match="max_bytes=10"):
        size_limits(max_bytes=10).read(io.BytesIO(b"x" * 11), "stream")
    assert size_limits(max_bytes=10).read(io.BytesIO(b"x" * 10), "stream") == b"x" * 10
