"""A run in which no case has a time for its reference writes tables that say why, and exits 0.

Issue 13, item 6: when every dataset was unavailable, or no CPU library (or only an unknown
one) yielded a time, ``speedup_tables`` died with a pandas ``TypeError``.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from speedup_figures import bar_figure, roofline_figure
from speedup_tables import write_tables
from workflow_runner import CONFIGS, run_snakemake

from sparsetir.bench.records import make_record

SPMM = {"reference": {"cpu": "best-cpu-library", "cuda": "torch-csr-i32"}, "cpu_libraries": ["scipy", "torch-csr-i32"]}
SDDMM = {"reference": {"cpu": "torch-sampled-addmm", "cuda": "torch-sampled-addmm"},
         "cpu_libraries": ["scipy", "torch-sampled-addmm"]}


def _timed(contender, median, *, dataset="cora", experiment="spmm"):
    stats = {"median": median, "p20": median, "p80": median, "mean": median, "min": median, "n": 3,
             "samples": [median] * 3}
    return make_record(experiment=experiment, op=experiment, device="cpu", dataset=dataset, feat=32,
                       contender=contender, status="ok", stats=stats, provenance={}, min_bytes=1_000_000,
                       flops=2_000_000, copy_bytes_per_s=1e10)


def _missing(contender, reason, *, dataset="cora", experiment="spmm"):
    return make_record(experiment=experiment, op=experiment, device="cpu", dataset=dataset, feat=32,
                       contender=contender, status="unavailable", reason=reason, provenance={})


CASES = {
    "every dataset unavailable": (SPMM, "spmm", [_missing("*", "unavailable: no route to reddit", dataset="reddit"),
                                                 _missing("*", "unavailable: no route to ppi", dataset="ppi")],
                                  "no dataset could be prepared"),
    "no CPU library timed": (SPMM, "spmm", [_timed("sparsetir-csr", 1e-3), _missing("scipy", "unavailable: broken"),
                                            _missing("torch-csr-i32", "unavailable: broken")],
                             "none of the CPU libraries (scipy, torch-csr-i32) was timed"),
    "an unknown library": ({**SPMM, "cpu_libraries": ["mkl"]}, "spmm", [_timed("sparsetir-csr", 1e-3),
                                                                        _timed("scipy", 2e-3)],
                           "no record comes from mkl"),
    "the reference not timed": (SDDMM, "sddmm", [_timed("sparsetir-csr", 1e-3, experiment="sddmm"),
                                                 _missing("torch-sampled-addmm", "unavailable: x", experiment="sddmm")],
                                "the reference, torch-sampled-addmm, was not timed"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_tables_and_figures_say_why_there_is_no_speedup(tmp_path, case):
    settings, experiment, records, why = CASES[case]
    paths = [tmp_path / name for name in ("s.csv", "s.md", "s.tex")]
    write_tables(records, settings, experiment, *paths)
    markdown = paths[1].read_text()
    assert "No case on cpu has a reference time" in markdown and why in markdown, markdown
    table = pd.read_csv(paths[0])
    assert table["speedup_vs_reference"].isna().all()
    assert "\\begin{tabular}" in paths[2].read_text()
    bar_figure(table, tmp_path / "bars.png", experiment)  # the figures step reads the same CSV
    roofline_figure(table, tmp_path / "roofline.png", experiment)
    assert (tmp_path / "bars.png").read_bytes()[:4] == b"\x89PNG"


def test_only_the_cases_without_a_reference_are_named(tmp_path):
    records = [_timed("sparsetir-csr", 1e-3), _timed("scipy", 2e-3),
               _timed("sparsetir-csr", 1e-3, dataset="pubmed"), _missing("scipy", "unavailable: x", dataset="pubmed")]
    write_tables(records, SPMM, "spmm", tmp_path / "s.csv", tmp_path / "s.md", tmp_path / "s.tex")
    markdown = (tmp_path / "s.md").read_text()
    assert "1 of 2 cases on cpu have no reference time" in markdown and "No case" not in markdown


@pytest.mark.slow
def test_a_workflow_whose_every_dataset_is_unavailable_ends_with_tables_and_exit_code_0(tmp_path):
    config = yaml.safe_load((CONFIGS / "smoke.yaml").read_text())
    config.update(datasets=["reddit"], hyb={})  # download-only, and downloads are off: nothing can run
    config["experiments"] = {"spmm": {**config["experiments"]["spmm"],
                                      "sparsetir": {"sparsetir-csr": "csr"}}}
    path = tmp_path / "nothing-runs.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "spmm", "--cores", "1", "--configfile", str(path))
    assert result.returncode == 0, result.stdout[-4000:]
    markdown = (tmp_path / "results" / "nothing-runs" / "spmm" / "speedup.md").read_text()
    assert "no dataset could be prepared" in markdown and "downloads are disabled" in markdown
    assert (tmp_path / "results" / "nothing-runs" / "spmm" / "figures" / "speedup_bars.png").exists()
