"""The workflow's data pre-flight: before any job runs (dry runs included), one table of every dataset
the config reads that no local route provides, with the routes tried and why (issue 29, item 3)."""

from __future__ import annotations

import yaml
from data_preflight import SHOWN_ENV, needs_of, preflight
from harness_config import check_config
from workflow_runner import CONFIGS, run_snakemake

from sparsetir.data.availability import SURVEY_FILE

DEFAULT = yaml.safe_load((CONFIGS / "default.yaml").read_text())
#: What the default config's families read, with the experiments that read it.
FAMILY_DATA = {"aifb": ["rgcn"], "mutag": ["rgcn"], "kitti-000000": ["conv"],
               "dlmc/transformer/magnitude/0.9/ffn_conv1": ["prunedbert"],
               "dlmc/transformer/magnitude/0.98/ffn_conv2": ["prunedbert"],
               "amazon_photo": ["spmm", "sddmm", "sage"], "amazon_cs": ["spmm", "sddmm", "sage"],
               "cora (features, labels)": ["sage"], "cora": ["spmm", "sddmm"], "reddit": ["spmm", "sddmm"]}
MIRROR_ONLY = ["dblp", "wiki-vote", "ego-facebook", "ca-condmat"]
DOWNLOAD_ONLY = ["ppi", "ogbn-arxiv", "ogbn-proteins", "reddit"]


def test_the_needs_cover_every_family_and_say_who_reads_each_dataset():
    needs = {need.name: need for need in needs_of(DEFAULT)}
    for name, users in FAMILY_DATA.items():
        assert list(needs[name].used_by) == users, name
    assert needs["cora (features, labels)"].files[0].relpath == "gnn-benchmark-npz/cora.npz"
    assert not any(name.startswith(("rmat:", "lidar:", "relational:")) for name in needs)  # generated: no data
    assert len(needs) == len({need.files for need in needs.values()})


def _without_mirror(tmp_path, config=DEFAULT):
    changed = {**config, "data": {**config["data"], "mirror": None, "download": False}}
    path = tmp_path / "nomirror.yaml"
    path.write_text(yaml.safe_dump(changed))
    return path


def test_the_table_names_what_a_clone_without_the_mirror_cannot_get(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SHOWN_ENV, "")  # not shown yet; restored (unset) afterwards
    monkeypatch.chdir(tmp_path)
    config = check_config(yaml.safe_load(_without_mirror(tmp_path).read_text()))
    rows = {row.dataset: row for row in preflight(config)}
    out = capsys.readouterr().out
    assert out.startswith("Data for this run") and out.count("Data for this run") == 1
    for name in FAMILY_DATA:  # every family has its real data embedded
        if name != "reddit":
            assert rows[name].status == "found" and rows[name].routes == ["embedded"], name
    for name in MIRROR_ONLY + DOWNLOAD_ONLY:
        assert rows[name].status == "unavailable" and rows[name].why == "disabled", name
        line = next(line for line in out.splitlines() if line.split()[:1] == [name])
        assert "mirror: none; download: off" in line and line.endswith("downloads are disabled"), line
    assert preflight(config) is None and capsys.readouterr().out == ""  # once per run (and its child processes)


def test_a_dry_run_prints_the_table_first_and_writes_nothing(tmp_path):
    result = run_snakemake(tmp_path, "-n", "--cores", "1", "--configfile", str(CONFIGS / "smoke.yaml"))
    assert result.returncode == 0, result.stdout[-3000:]
    lines = result.stdout.splitlines()
    (first,) = [number for number, line in enumerate(lines) if line.startswith("Data for this run")]
    # cora, the R-MAT graph and the DLMC weight found; reddit, bgs and dblp not
    assert lines[first].endswith("6 datasets, 3 found, 0 to download, 3 unavailable"), lines[first]
    assert first < next(number for number, line in enumerate(lines) if line.startswith("Job stats"))  # before the plan
    for name, user in (("reddit", "spmm, sddmm"), ("bgs", "rgcn"), ("dblp", "sage")):
        line = next(line for line in lines if line.split()[:1] == [name])
        assert user in line and line.endswith("downloads are disabled"), line
    assert "This was a dry-run" in result.stdout
    assert not list(tmp_path.rglob(SURVEY_FILE))  # a dry run writes nothing
