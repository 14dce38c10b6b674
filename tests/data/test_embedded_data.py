"""The embedded ``data/`` folder: every file is a registry file with its provenance and sha256, the
folder stays within its size budget, and with no mirror, cache or network every family of the default
workflow finds its real data there (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sparsetir import data
from sparsetir.data import masks
from sparsetir.data.checksum import file_sha256
from sparsetir.data.entities import ENTITY_TASKS
from sparsetir.data.node_classification import LABELLED_GRAPHS, load_node_classification
from sparsetir.data.resolve import probe

REPO_ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = REPO_ROOT / "data"
DEFAULT = yaml.safe_load((REPO_ROOT / "workflows" / "config" / "default.yaml").read_text())
#: The repository may grow by at most 15 MB for its embedded data (issue 29); it held 1.2 MB before.
BUDGET_BYTES = 15_000_000 + 1_200_000
NOT_DATA = {"EMBEDDED.md", "provenance.txt"}


def _embedded_files() -> list[Path]:
    return sorted(path for path in EMBEDDED.rglob("*")
                  if path.is_file() and path.name not in NOT_DATA and "cache" not in path.relative_to(EMBEDDED).parts)


def _registry_files() -> dict[str, data.DataFile]:
    files = {file.relpath: file for name in data.names() for file in data.entry(name).files}
    files.update({source.file.relpath: source.file for source in LABELLED_GRAPHS.values()})
    files.update({split.relpath: split for splits in ENTITY_TASKS.values() for split in splits})
    return files


def test_every_embedded_file_is_a_registry_file_with_its_provenance_and_sha256():
    known = _registry_files()
    found = _embedded_files()
    assert len(found) >= 14
    for path in found:
        relpath = path.relative_to(EMBEDDED).as_posix()
        assert relpath in known, f"data/{relpath} is not a file of any registry entry"
        file = known[relpath]
        assert file.sha256 is not None, relpath
        assert file_sha256(path) == file.sha256, f"data/{relpath} does not hash to the registry's sha256"
        if file.size is not None:
            assert path.stat().st_size == file.size, relpath
        provenance = (EMBEDDED / relpath.split("/", 1)[0] / "provenance.txt").read_text()
        assert file.sha256 in provenance and path.name in provenance, f"data/{relpath}: not in its provenance.txt"


def test_embedded_md_lists_every_folder_and_kitti_says_its_licence():
    listing = (EMBEDDED / "EMBEDDED.md").read_text()
    for folder in sorted({path.relative_to(EMBEDDED).parts[0] for path in _embedded_files()}):
        assert f"`{folder}/`" in listing, folder
    assert "CC BY-NC-SA 3.0" in (EMBEDDED / "pointcloud-kitti-full" / "provenance.txt").read_text()


def test_the_embedded_data_stays_within_the_size_budget():
    total = sum(path.stat().st_size for path in EMBEDDED.rglob("*") if path.is_file()
                and "cache" not in path.relative_to(EMBEDDED).parts)
    assert total <= BUDGET_BYTES, f"data/ holds {total / 1e6:.1f} MB; the budget is {BUDGET_BYTES / 1e6:.1f} MB"


@pytest.fixture
def embedded_only(monkeypatch, tmp_path):
    """The repository's data/ folder, an empty cache, no mirror and no downloads."""
    monkeypatch.delenv(data.EMBEDDED_ENV, raising=False)
    monkeypatch.delenv(data.MIRROR_ENV, raising=False)
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(data.DOWNLOAD_ENV, "0")
    data.clear_caches()
    yield
    data.clear_caches()


def _family_datasets() -> dict[str, list[str]]:
    """What the default config's families read from the registry (the generated inputs left out)."""
    sage = [name for mode in ("full", "minibatch") for name in DEFAULT["sage"][mode]["datasets"]]
    return {"rgcn": list(DEFAULT["rgcn"]["datasets"]), "conv": list(DEFAULT["conv"]["clouds"]),
            "prunedbert": list(DEFAULT["attention"]["prunedbert"]["matrices"]), "sage": sage}


def test_every_family_of_the_default_config_loads_its_real_data_without_a_mirror(embedded_only):
    wanted = _family_datasets()
    for name in wanted["rgcn"]:
        graph = data.load_relational(name)
        assert len(graph.relations) > 1 and graph.num_edges > 0 and data.load(name).shape == data.entry(name).shape, name
    for name in wanted["conv"]:
        points = data.load(name)
        assert points.shape == data.entry(name).shape and points.dtype.name == "float32", name
    for name in wanted["prunedbert"]:
        pattern = masks.dlmc(name)
        assert pattern.nnz == data.entry("dlmc/" + name).nnz, name
    for name in wanted["sage"]:
        graph = load_node_classification(name)
        assert graph.labels.shape == (graph.adjacency.shape[0],) and graph.features.shape[0] == graph.labels.size
    for name in ("amazon_cs", "amazon_photo", "coauthor_cs"):  # the SpMM table's benchmark graphs
        assert data.load(name).nnz == data.entry(name).nnz >= data.BENCHMARK_MIN_NNZ, name


def test_probe_finds_the_embedded_copy_first(embedded_only, monkeypatch, tmp_path):
    (file,) = data.entry("aifb").files
    found = probe(file)
    assert found.route == "embedded" and found.path == EMBEDDED / file.relpath
    assert found.tried == ("embedded: found",) and found.download is None and found.no_download is None


def test_probe_says_why_a_file_is_out_of_reach_and_touches_nothing(embedded_only, tmp_path):
    (file,) = data.entry("dblp").files  # mirror only: not embedded
    answer = probe(file)
    assert answer.path is None and answer.route is None
    assert answer.tried == ("embedded: not there", "cache: not there", "mirror: none")
    assert answer.download is None and "downloads are disabled" in answer.no_download
    on = probe(file, allow_download=True)
    assert on.download == file.url and on.no_download is None
    assert not (tmp_path / "cache").exists()  # probing downloads nothing and creates nothing


def test_probe_reports_a_corrupt_copy_without_deleting_it(embedded_only, tmp_path):
    (file,) = data.entry("dblp").files
    cached = tmp_path / "cache" / file.relpath
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not the npz")
    answer = probe(file, allow_download=False)
    assert answer.path is None and "cache: refused" in answer.tried
    assert "bytes but" in answer.refused[0] and cached.exists()
