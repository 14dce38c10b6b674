"""The dataset registry: every entry loads (from the embedded data/ or the mirror); damaged or missing files are refused."""

from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir import data
from sparsetir.data import MIRROR_ENV
from sparsetir.data.checksum import file_sha256

KNOWN_NODE_COUNTS = {
    "cora": 2708,
    "citeseer": 3327,
    "pubmed": 19717,
    "cora_ml": 2995,
    "amazon_cs": 13752,
    "amazon_photo": 7650,
    "coauthor_cs": 18333,
    "dblp": 17716,
    "wiki-vote": 7115,
    "p2p-gnutella05": 8846,
    "p2p-gnutella06": 8717,
    "ego-facebook": 4039,
    "ca-condmat": 23133,
    "karate": 34,
}

EXPECTED_BENCHMARK_GRAPHS = [
    "pubmed", "amazon_cs", "amazon_photo", "coauthor_cs", "dblp", "wiki-vote", "ego-facebook", "ca-condmat",
]


MIRROR_NAMES = [name for name in data.names() if data.entry(name).source == "mirror"]
DOWNLOAD_NAMES = [name for name in data.names() if data.entry(name).source == "download"]


@pytest.mark.parametrize("name", MIRROR_NAMES)
def test_every_dataset_loads_as_recorded(real_data, name):
    real_data(name)  # embedded, or in the mirror: else skipped
    entry = data.entry(name)
    matrix = data.load(name)
    if entry.kind == "pointcloud":
        assert isinstance(matrix, np.ndarray) and matrix.dtype == np.float32 and matrix.shape == entry.shape
        return
    assert isinstance(matrix, sp.csr_matrix)
    assert matrix.shape == entry.shape and matrix.nnz == entry.nnz
    assert matrix.has_sorted_indices
    matrix.check_format(full_check=True)
    if entry.kind == "graph":
        assert matrix.shape[0] == matrix.shape[1]
    if entry.symmetrize:
        assert (matrix != matrix.T).nnz == 0


def test_every_graph_of_the_paper_is_registered_with_its_url():
    for name in data.PAPER_GNN_GRAPHS + data.PAPER_RGCN_GRAPHS:
        entry = data.entry(name)
        assert entry.kind in ("graph", "rdf") and all(file.url for file in entry.files), name
    assert set(data.PAPER_RGCN_GRAPHS) == set(data.relational_graphs())


@pytest.mark.parametrize("name", DOWNLOAD_NAMES)
def test_download_only_graphs_are_unverified_not_invented(name):
    entry = data.entry(name)
    assert not entry.verified and "unverified" in entry.description
    assert all(file.sha256 is None and file.url.startswith(("http://", "https://")) for file in entry.files)
    assert entry.shape is None and entry.nnz is None


@pytest.mark.parametrize("name", DOWNLOAD_NAMES)
def test_download_only_graph_without_a_route_says_why(isolated_data, name):
    with pytest.raises(data.DatasetUnavailableError, match=r"is unavailable: not in the cache folder .*downloads are disabled"):
        data.load(name)


def test_known_node_and_edge_counts(use_mirror):
    assert sorted(n for n in data.graphs() if data.entry(n).source == "mirror") == sorted(KNOWN_NODE_COUNTS)
    for name, nodes in KNOWN_NODE_COUNTS.items():
        assert data.load(name).shape == (nodes, nodes), name
    assert data.load("ego-facebook").nnz == 2 * 88234  # listed once, symmetrised
    assert data.load("ca-condmat").nnz == 186936  # already lists both directions
    assert data.load("wiki-vote").nnz == 103689  # directed, kept as is


def test_benchmark_graphs_are_the_graphs_with_50k_nonzeros(use_mirror):
    assert data.benchmark_graphs() == EXPECTED_BENCHMARK_GRAPHS
    for name in data.graphs():
        if data.entry(name).source != "mirror":
            continue
        assert (data.load(name).nnz >= data.BENCHMARK_MIN_NNZ) == (name in EXPECTED_BENCHMARK_GRAPHS), name


def test_graphs_and_matrices_partition_the_registry():
    kinds = data.graphs() + data.matrices() + data.relational_graphs() + data.point_clouds()
    assert sorted(kinds) == sorted(data.names())
    assert "bcsstk13" in data.matrices() and "dlmc/transformer/magnitude/0.9/ffn_conv1" in data.matrices()


def test_registry_digests_come_from_the_provenance_files(mirror_path):
    for name in MIRROR_NAMES:
        for file in data.entry(name).files:
            assert re.fullmatch(r"[0-9a-f]{64}", file.sha256), name
            provenance = (mirror_path / file.relpath.split("/", 1)[0] / "provenance.txt").read_text()
            assert file.sha256 in provenance, f"{name}: digest of {file.relpath} is not in its provenance.txt"
            assert file.relpath.rsplit("/", 1)[1] in provenance, name
            if file.size is not None:
                assert str(file.size) in provenance, name


def test_load_returns_independent_copies(real_data):
    real_data("cora")
    first = data.load("cora")
    first.data[:] = 7
    first.indices[:] = 0
    again = data.load("cora")
    assert np.all(again.data == 1) and again.has_sorted_indices
    assert again.data.flags.writeable  # a copy: usable as a kernel input without another copy


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="unknown dataset 'nope'.*cora.*ca-condmat"):
        data.load("nope")


def test_unset_mirror_is_a_clear_file_not_found(isolated_data):
    assert data.mirror_dir() is None
    with pytest.raises(FileNotFoundError, match=MIRROR_ENV):
        data.load("cora")


def test_mirror_dir_reads_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path))
    assert data.mirror_dir() == tmp_path.resolve()
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "missing"))
    assert data.mirror_dir() is None
    monkeypatch.setenv(MIRROR_ENV, "")
    assert data.mirror_dir() is None


def test_missing_file_in_the_mirror(monkeypatch, tmp_path, isolated_data):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match=r"planetoid/ind\.cora\.graph is unavailable: .*not in the mirror folder"):
        data.load("cora")


def _copy_into_mirror(real_file, tmp_path, relpath):
    target = tmp_path / "mirror" / relpath
    target.parent.mkdir(parents=True)
    shutil.copyfile(real_file(relpath), target)
    return tmp_path / "mirror", target


def test_checksum_mismatch_is_refused(monkeypatch, real_file, tmp_path, isolated_data):
    entry = data.entry("cora")
    (file,) = entry.files
    mirror, target = _copy_into_mirror(real_file, tmp_path, file.relpath)
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    assert data.load("cora").nnz == entry.nnz  # the good copy loads
    corrupted = bytearray(target.read_bytes())
    corrupted[len(corrupted) // 2] ^= 0x01
    target.write_bytes(bytes(corrupted))
    os.utime(target, ns=(0, 10**18))  # a new mtime, whatever the clock's resolution
    actual = file_sha256(target)
    assert actual != file.sha256
    with pytest.raises(ValueError) as info:
        data.load("cora")
    message = str(info.value)
    assert str(target) in message and file.sha256 in message and actual in message


@pytest.mark.parametrize("name", ["citeseer", "wiki-vote"])  # without / with a recorded size
def test_truncated_file_is_refused(monkeypatch, real_file, tmp_path, isolated_data, name):
    (file,) = data.entry(name).files
    mirror, target = _copy_into_mirror(real_file, tmp_path, file.relpath)
    target.write_bytes(target.read_bytes()[:-100])
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    with pytest.raises(ValueError, match=rf"{re.escape(str(target))}.*(checksum mismatch|truncated)"):
        data.load(name)


def test_file_sha256_is_cached_per_mtime(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(b"one")
    first = file_sha256(path)
    assert file_sha256(path) == first
    path.write_bytes(b"two")
    os.utime(path, ns=(0, 10**18))
    assert file_sha256(path) != first
