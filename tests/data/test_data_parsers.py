"""Each parser on the real mirror files, on small hand-written files, and on damaged ones."""

from __future__ import annotations

import collections
import pickle
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.data import (
    canonical_csr,
    csr_from_arrays,
    csr_from_coordinates,
    read_edge_list,
    read_gnn_benchmark_npz,
    read_graphdata_npz,
    read_matrix_market,
    read_planetoid_graph,
    read_smtx,
    symmetrize,
)


def assert_canonical(matrix):
    assert isinstance(matrix, sp.csr_matrix)
    assert matrix.has_sorted_indices
    assert matrix.indptr.dtype == matrix.indices.dtype
    copy = matrix.copy()
    copy.sum_duplicates()
    assert copy.nnz == matrix.nnz, "duplicate coordinates left in"
    matrix.check_format(full_check=True)


def assert_pattern(matrix):
    assert matrix.dtype == np.float32
    assert np.all(matrix.data == 1)


def is_symmetric(matrix):
    return (matrix != matrix.T).nnz == 0


# ---------------------------------------------------------------- real files in the mirror


@pytest.mark.parametrize(
    "name, nodes, nnz",
    [("cora", 2708, 10556), ("citeseer", 3327, 9228), ("pubmed", 19717, 88651)],
)
def test_planetoid_graphs(real_file, name, nodes, nnz):
    graph = read_planetoid_graph(real_file(f"planetoid/ind.{name}.graph"))
    assert graph.shape == (nodes, nodes) and graph.nnz == nnz
    assert_canonical(graph)
    assert_pattern(graph)
    assert is_symmetric(graph)  # Planetoid lists every edge both ways


@pytest.mark.parametrize(
    "name, nodes, nnz",
    [("cora", 2708, 5429), ("citeseer", 3312, 4715), ("cora_ml", 2995, 8416)],
)
def test_gnn_benchmark_npz(real_file, name, nodes, nnz):
    graph = read_gnn_benchmark_npz(real_file(f"gnn-benchmark-npz/{name}.npz"))
    assert graph.shape == (nodes, nodes) and graph.nnz == nnz
    assert_canonical(graph)
    assert symmetrize(graph).nnz == {"cora": 10556, "citeseer": 9196, "cora_ml": 16316}[name]


@pytest.mark.parametrize(
    "name, nodes, nnz, symmetric",
    [
        ("amazon_cs", 13752, 287209, False),
        ("amazon_photo", 7650, 143663, False),
        ("coauthor_cs", 18333, 163788, True),
        ("dblp", 17716, 105734, True),
    ],
)
def test_graphdata_npz(real_file, name, nodes, nnz, symmetric):
    graph = read_graphdata_npz(real_file(f"graphdata-npz/{name}.npz"))
    assert graph.shape == (nodes, nodes) and graph.nnz == nnz
    assert_canonical(graph)
    assert graph.dtype == np.float32
    assert is_symmetric(graph) == symmetric


def test_graphdata_symmetrised_amazon_matches_published_edge_count(real_file):
    # Amazon Computers has 491,722 directed edges once symmetrised (as in PyG / Shchur et al.).
    assert symmetrize(read_graphdata_npz(real_file("graphdata-npz/amazon_cs.npz"))).nnz == 491722


@pytest.mark.parametrize(
    "relpath, nodes, edges",
    [
        ("snap-wiki-Vote/wiki-Vote.txt", 7115, 103689),
        ("snap-p2p-Gnutella/p2p-Gnutella05.txt", 8846, 31839),
        ("snap-p2p-Gnutella/p2p-Gnutella06.txt", 8717, 31525),
        ("snap-ego-facebook/facebook", 4039, 88234),
        ("snap-ca-CondMat/CA-CondMat_tab-sep.edgelist", 23133, 186936),
    ],
)
def test_snap_edge_lists(real_file, relpath, nodes, edges):
    graph = read_edge_list(real_file(relpath))
    assert graph.shape == (nodes, nodes) and graph.nnz == edges
    assert_canonical(graph)
    assert_pattern(graph)
    assert np.all(np.diff(graph.indptr) + np.diff(graph.tocsc().indptr) > 0), "relabelling left an isolated id"


def test_snap_without_relabelling_keeps_the_raw_ids(real_file):
    graph = read_edge_list(real_file("snap-wiki-Vote/wiki-Vote.txt"), relabel=False)
    assert graph.shape == (8298, 8298) and graph.nnz == 103689  # ids run 3..8297 with gaps


@pytest.mark.parametrize(
    "name, shape, nnz, dtype",
    [
        ("bcsstk13", (2003, 2003), 83883, np.float64),  # real symmetric, expanded
        ("west0067", (67, 67), 294, np.float64),
        ("karate", (34, 34), 156, np.float32),  # pattern symmetric
        ("jagmesh7", (1138, 1138), 7450, np.float32),
    ],
)
def test_matrix_market(real_file, name, shape, nnz, dtype):
    matrix = read_matrix_market(real_file(f"suitesparse-lagraph/{name}.mtx"))
    assert matrix.shape == shape and matrix.nnz == nnz and matrix.dtype == dtype
    assert_canonical(matrix)
    if dtype == np.float32:
        assert_pattern(matrix)


@pytest.mark.parametrize(
    "relpath, shape, nnz",
    [
        ("transformer/magnitude_pruning/0.9/body_encoder_layer_0_ffn_conv1_fully_connected.smtx", (2048, 512), 104857),
        ("rn50/magnitude_pruning/0.9/final_dense.smtx", (1000, 2048), 204800),
        ("rn50/magnitude_pruning/0.9/initial_conv.smtx", (64, 147), 940),
    ],
)
def test_dlmc_smtx(real_file, relpath, shape, nnz):
    matrix = read_smtx(real_file("dlmc/" + relpath))
    assert matrix.shape == shape and matrix.nnz == nnz
    assert_canonical(matrix)
    assert_pattern(matrix)


# ---------------------------------------------------------------- truncated real files


@pytest.mark.parametrize(
    "reader, relpath, keep",
    [
        (read_planetoid_graph, "planetoid/ind.cora.graph", 2000),
        (read_gnn_benchmark_npz, "gnn-benchmark-npz/cora.npz", 100_000),
        (read_graphdata_npz, "graphdata-npz/dblp.npz", 100_000),
        (read_matrix_market, "suitesparse-lagraph/bcsstk13.mtx", 20_000),
        (read_smtx, "dlmc/rn50/magnitude_pruning/0.9/final_dense.smtx", 5000),
        (read_smtx, "dlmc/rn50/magnitude_pruning/0.9/initial_conv.smtx", 3000),
        (read_edge_list, "snap-ego-facebook/facebook", None),  # None: cut a line after its first id
    ],
)
def test_truncated_files_give_value_errors(real_file, tmp_path, reader, relpath, keep):
    data = real_file(relpath).read_bytes()
    if keep is None:
        keep = data.index(b" ", len(data) // 2)
    truncated = tmp_path / relpath.rsplit("/", 1)[1]
    truncated.write_bytes(data[:keep])
    with pytest.raises(ValueError, match=truncated.name):
        reader(truncated)


# ---------------------------------------------------------------- hand-written planetoid pickles


def test_planetoid_ids_seen_only_as_neighbours_get_rows(tmp_path):
    graph = collections.defaultdict(list, {0: [1, 5, 1], 1: [0], 2: []})
    path = tmp_path / "ind.tiny.graph"
    path.write_bytes(pickle.dumps(graph, protocol=2))
    matrix = read_planetoid_graph(path)
    assert matrix.shape == (6, 6)
    assert sorted(zip(*matrix.nonzero())) == [(0, 1), (0, 5), (1, 0)]  # duplicate 0->1 collapsed
    assert_pattern(matrix)


@pytest.mark.parametrize(
    "payload, error, message",
    [
        (collections.defaultdict(list, {0: [1.5]}), ValueError, "node ids must be integers"),
        (collections.defaultdict(list, {0: ["a"]}), ValueError, "node ids must be integers"),
        (collections.defaultdict(list, {0: [-1]}), ValueError, "non-negative"),
        (collections.defaultdict(list), ValueError, "empty"),
        ([[0, 1]], TypeError, "expected a dict"),
        ({0: (1, 2)}, TypeError, "list of neighbour ids"),
    ],
)
def test_planetoid_bad_content(tmp_path, payload, error, message):
    path = tmp_path / "ind.bad.graph"
    path.write_bytes(pickle.dumps(payload, protocol=2))
    with pytest.raises(error, match=message):
        read_planetoid_graph(path)


# ---------------------------------------------------------------- hand-written edge lists


def test_edge_list_comments_tabs_and_sparse_ids(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text("# a comment\n# FromNodeId\tToNodeId\r\n10\t30\r\n30 10\n10  700\n10 30\n")
    graph = read_edge_list(path)
    assert graph.shape == (3, 3)  # ids 10, 30, 700 -> 0, 1, 2
    assert sorted(zip(*graph.nonzero())) == [(0, 1), (0, 2), (1, 0)]
    assert_pattern(graph)


@pytest.mark.parametrize(
    "text, message",
    [
        ("0 1\n1 x\n", "malformed edge list"),
        ("0 1\n1 2.5\n", "malformed edge list"),
        ("0 1\n2\n", "malformed edge list"),
        ("0 1 7\n1 2 8\n", "expected two columns"),
        ("0\n1\n", "expected two columns"),
        ("0 1\n-3 2\n", "non-negative"),
        ("# only a comment\n", "no edges"),
        ("", "no edges"),
    ],
)
def test_edge_list_bad_content(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_edge_list(path)


# ---------------------------------------------------------------- hand-written smtx


def test_smtx_small(tmp_path):
    path = tmp_path / "tiny.smtx"
    path.write_text("3, 4, 4\n0 2 2 4\n3 1 0 3\n")  # row 0 unsorted, row 2 duplicate
    matrix = read_smtx(path)
    assert matrix.shape == (3, 4)
    assert matrix.toarray().tolist() == [[0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 1]]
    assert_canonical(matrix)
    assert_pattern(matrix)


def test_smtx_all_zero_matrix(tmp_path):
    path = tmp_path / "zero.smtx"
    path.write_text("2, 3, 0\n0 0 0\n")
    assert read_smtx(path).shape == (2, 3) and read_smtx(path).nnz == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty file"),
        ("3 4\n0 1 2 3\n0 1 2\n", "header must be 'rows, cols, nnz'"),
        ("3, 4, x\n0 1 2 3\n0 1 2\n", "header must be"),
        ("3, 4, 3\n0 1 2 3\n", "expected 3 lines"),
        ("3, 4, 3\n0 1 2\n0 1 2\n", "3 row offsets for 3 rows, expected 4"),
        ("3, 4, 3\n0 1 2 4\n0 1 2\n", "last row offset is 4 but the header says nnz = 3"),
        ("3, 4, 3\n0 1 2 3\n0 1\n", "2 column indices but the header says nnz = 3"),
        ("3, 4, 3\n0 2 1 3\n0 1 2\n", "must be non-decreasing"),
        ("3, 4, 3\n1 1 2 3\n0 1 2\n", "indptr\\[0\\] must be 0"),
        ("3, 4, 3\n0 1 2 3\n0 4 2\n", "has index 4 out of range for length 4"),
        ("3, 4, 3\n0 1 2 3\n0 a 2\n", "column indices must be integers, found 'a'"),
        ("3, 4, 3\n0 1 2 3\n0 1 2\n9 9\n", "expected 3 lines"),
    ],
)
def test_smtx_bad_content(tmp_path, text, message):
    path = tmp_path / "bad.smtx"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_smtx(path)


# ---------------------------------------------------------------- hand-written Matrix Market


def test_matrix_market_duplicates_are_summed(tmp_path):
    path = tmp_path / "dup.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 2 1.5\n1 2 2.0\n2 1 -1\n")
    matrix = read_matrix_market(path)
    assert matrix.nnz == 2 and matrix[0, 1] == 3.5 and matrix[1, 0] == -1


def test_matrix_market_pattern_duplicates_collapse(tmp_path):
    path = tmp_path / "dup.mtx"
    path.write_text("%%MatrixMarket matrix coordinate pattern general\n2 2 3\n1 2\n1 2\n2 1\n")
    matrix = read_matrix_market(path)
    assert matrix.nnz == 2
    assert_pattern(matrix)


def test_matrix_market_garbage(tmp_path):
    path = tmp_path / "bad.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 x 1.0\n")
    with pytest.raises(ValueError, match="bad.mtx"):
        read_matrix_market(path)


@pytest.mark.parametrize("last", ["3 2 2.0e", "3 2 2x", "3 2 8.0.", "3 2 2.0"])
def test_matrix_market_with_a_cut_last_token_and_no_final_newline_does_not_crash(tmp_path, last):
    # scipy's fast_matrix_market read past its buffer on these (SIGSEGV; found by issue 27's fuzz suite):
    # run in a subprocess so a crash is a failure, not the end of the test run
    path = tmp_path / "cut.mtx"
    path.write_text(f"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n{last}")
    code = ("import sys\nfrom sparsetir.data import read_matrix_market\ntry:\n"
            f"    print(read_matrix_market({str(path)!r}).nnz)\nexcept ValueError as error:\n    print('refused', error)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (result.returncode, result.stderr[-500:])
    assert result.stdout.strip() == "2" or result.stdout.startswith("refused") and "cut.mtx" in result.stdout


# ---------------------------------------------------------------- npz without the adjacency


def test_gnn_benchmark_npz_without_adjacency(tmp_path):
    path = tmp_path / "noadj.npz"
    np.savez(path, labels=np.arange(3))
    with pytest.raises(ValueError, match="no adjacency arrays found.*labels"):
        read_gnn_benchmark_npz(path)


def test_gnn_benchmark_npz_inconsistent_arrays(tmp_path):
    path = tmp_path / "bad.npz"
    arrays = {"adj_indices": [0, 5], "adj_indptr": [0, 1, 2], "adj_shape": [2, 2], "adj_data": [1.0, 1.0]}
    np.savez(path, **{key: np.array(value) for key, value in arrays.items()})
    with pytest.raises(ValueError, match="index 5 out of range for length"):
        read_gnn_benchmark_npz(path)


def test_graphdata_npz_missing_member(tmp_path):
    path = tmp_path / "noadj.npz"
    np.savez(path, labels=np.arange(3))
    with pytest.raises(ValueError, match="no array named 'adj_matrix'"):
        read_graphdata_npz(path)


# ---------------------------------------------------------------- canonical form helpers


def test_canonical_csr_sorts_and_sums():
    coo = sp.coo_matrix(([1.0, 2.0, 3.0, 0.0], ([0, 0, 1, 1], [2, 2, 0, 1])), shape=(2, 3))
    matrix = canonical_csr(coo)
    assert matrix.nnz == 3 and matrix[0, 2] == 3.0
    assert matrix[1, 1] == 0 and matrix.indices.tolist() == [2, 0, 1]  # explicit zero kept
    assert_canonical(matrix)


@pytest.mark.parametrize(
    "args, error, message",
    [
        (([0, 1], [0], None, (2, 2)), ValueError, "indptr must have 3 entries \\(rows \\+ 1\\), got 2"),
        (([0, 1, 1], [0.5], None, (2, 2)), TypeError, "indices must hold integers"),
        (([0, 1, 1], [0], [1.0, 2.0], (2, 2)), ValueError, "data has shape"),
        (([0, 1, 1], [0], None, (2, -2)), ValueError, "shape must be non-negative"),
    ],
)
def test_csr_from_arrays_rejects(args, error, message):
    with pytest.raises(error, match=message):
        csr_from_arrays(*args)


def test_csr_from_coordinates_rejects_out_of_range():
    with pytest.raises(ValueError, match="row coordinate 3 is out of range for 3 rows"):
        csr_from_coordinates([0, 3], [0, 1], (3, 3))


def test_symmetrize_rules():
    directed = csr_from_coordinates([0, 1, 1], [1, 0, 2], (3, 3))
    undirected = symmetrize(directed)
    assert undirected.nnz == 4 and is_symmetric(undirected)
    assert_pattern(undirected)
    with pytest.raises(ValueError, match="square"):
        symmetrize(sp.csr_matrix((2, 3)))
    with pytest.raises(ValueError, match="negative weights"):
        symmetrize(sp.csr_matrix(np.array([[0.0, -1.0], [0.0, 0.0]])))


# ---------------------------------------------------------------- a broken deflate stream (make fuzz seed 0, case 70)


def _break_deflate(path, member):
    """Overwrite the first compressed byte of ``member`` with 0xff: a deflate block of the reserved type 3."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    raw = bytearray(path.read_bytes())
    name_len = int.from_bytes(raw[info.header_offset + 26: info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28: info.header_offset + 30], "little")
    raw[info.header_offset + 30 + name_len + extra_len] = 0xFF
    path.write_bytes(bytes(raw))


def test_npz_readers_refuse_a_broken_deflate_stream(tmp_path):
    import zlib

    from sparsetir.data import read_scipy_npz

    matrix = sp.random(40, 30, density=0.2, format="csr", random_state=0)
    scipy_path = tmp_path / "scipy.npz"
    sp.save_npz(scipy_path, matrix, compressed=True)
    _break_deflate(scipy_path, "indptr.npy")
    bench_path = tmp_path / "bench.npz"
    np.savez_compressed(bench_path, adj_data=matrix.data, adj_indices=matrix.indices, adj_indptr=matrix.indptr,
                        adj_shape=np.array(matrix.shape))
    _break_deflate(bench_path, "adj_indices.npy")
    for reader, path in ((read_scipy_npz, scipy_path), (read_gnn_benchmark_npz, bench_path)):
        with pytest.raises(ValueError, match=str(path.name)) as caught:
            reader(path)
        assert not isinstance(caught.value, zlib.error)
