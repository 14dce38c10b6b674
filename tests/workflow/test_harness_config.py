"""What the config module derives: dataset slugs, cases, the paper's hyb format strings."""

import pytest
import yaml
from harness_config import cases, dataset_names, dataset_slug, hyb_format, sparsetir_formats
from pending_experiment import write_pending_tables
from workflow_runner import CONFIGS

DEFAULT = yaml.safe_load((CONFIGS / "default.yaml").read_text())


def test_hyb_format_strings_follow_the_paper_table():
    assert hyb_format("cora", DEFAULT["hyb"]) == "hyb:1:1,2,4"
    assert hyb_format("ogbn-proteins", DEFAULT["hyb"]) == "hyb:8:1,2,4,8,16,32,64,128,256"
    assert hyb_format("reddit", DEFAULT["hyb"]) == "hyb:8:1,2,4,8,16,32,64,128,256,512"
    assert hyb_format("ppi", DEFAULT["hyb"]) == "hyb:16:1,2,4,8,16,32"
    assert hyb_format("amazon_cs", DEFAULT["hyb"]) == "hyb"  # not in the paper: the format's own default


def test_sparsetir_contenders_per_dataset():
    spmm = DEFAULT["experiments"]["spmm"]
    tuned = {"status": "ok", "config": {"format": "ell:8", "unroll": 4}, "tune_s": 3.5}
    assert sparsetir_formats(spmm, "pubmed", DEFAULT["hyb"], tuned) == {
        "sparsetir-csr": "csr", "sparsetir-hyb": "hyb:1:1,2,4,8,16,32",
        "sparsetir-tuned": {"config": {"format": "ell:8", "unroll": 4}, "tune_s": 3.5}}
    failed = sparsetir_formats(spmm, "pubmed", DEFAULT["hyb"], {"status": "failed", "reason": "no candidate ran"})
    assert failed["sparsetir-tuned"] == {"error": "unavailable: tuning: no candidate ran"}
    with pytest.raises(ValueError, match="no tuning result"):
        sparsetir_formats(spmm, "pubmed", DEFAULT["hyb"])


def test_default_covers_the_paper_graphs_and_the_benchmark_graphs():
    from sparsetir.data import PAPER_GNN_GRAPHS, benchmark_graphs

    assert set(PAPER_GNN_GRAPHS) | set(benchmark_graphs()) <= set(DEFAULT["datasets"])
    assert DEFAULT["feats"] == [32, 128]  # full.yaml: 32..512
    assert ("rmat:14:16", 64) in cases(DEFAULT)


def test_slugs_are_file_names():
    assert dataset_slug("rmat:12:16") == "rmat-12-16"
    assert dataset_slug("dlmc/rn50/magnitude/0.9/final_dense") == "dlmc-rn50-magnitude-0.9-final_dense"
    with pytest.raises(ValueError, match="map to the same file name"):
        dataset_names({"datasets": ["rmat:9:4", "rmat-9-4"], "feats": [8]})


def test_pending_experiments_say_not_implemented_and_carry_no_numbers(tmp_path):
    write_pending_tables("rgcn", tmp_path / "t.csv", tmp_path / "t.md", tmp_path / "t.tex")
    for name in ("t.csv", "t.md", "t.tex"):
        text = (tmp_path / name).read_text()
        assert "not implemented yet" in text
    assert not any(ch.isdigit() for ch in (tmp_path / "t.tex").read_text())
    with pytest.raises(ValueError, match="unknown pending experiment"):
        write_pending_tables("spmv", tmp_path / "a", tmp_path / "b", tmp_path / "c")
