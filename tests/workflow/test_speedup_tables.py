"""Aggregation on synthetic records: medians and means, references, best CPU library, bandwidth."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from speedup_figures import bar_figure, roofline_figure
from speedup_tables import geomean, markdown_report, speedup_frame, wide_table, write_tables

from sparsetir.bench.records import make_record

SPMM = {"reference": {"cpu": "best-cpu-library", "cuda": "torch-csr-i32"},
        "cpu_libraries": ["scipy", "torch-csr-i32"]}
SDDMM = {"reference": {"cpu": "torch-sampled-addmm", "cuda": "torch-sampled-addmm"},
         "cpu_libraries": ["scipy", "torch-sampled-addmm", "dgl-gsddmm"]}


def _timed(contender, median, mean=None, *, dataset="cora", feat=32, device="cpu", experiment="spmm",
           min_bytes=1_000_000, copy=1e10):
    mean = median if mean is None else mean
    stats = {"median": median, "p20": median * 0.9, "p80": median * 1.1, "mean": mean, "min": median * 0.8,
             "n": 3, "samples": [median * 0.9, median, median * 1.1]}
    return make_record(experiment=experiment, op=experiment, device=device, dataset=dataset, feat=feat,
                       contender=contender, status="ok", stats=stats, provenance={}, min_bytes=min_bytes,
                       flops=2 * min_bytes, copy_bytes_per_s=copy)


def _missing(contender, reason, *, dataset="cora", feat=32, experiment="spmm"):
    return make_record(experiment=experiment, op=experiment, device="cpu", dataset=dataset, feat=feat,
                       contender=contender, status="unavailable", reason=reason, provenance={})


def _row(frame, contender, dataset="cora", feat=32, device="cpu"):
    mine = frame[(frame.contender == contender) & (frame.dataset == dataset) & (frame.feat == feat)
                 & (frame.device == device)]
    assert len(mine) == 1
    return mine.iloc[0]


def test_cpu_spmm_speedup_is_over_the_best_cpu_library_of_each_case():
    records = [_timed("sparsetir-csr", 1e-3, 1.2e-3), _timed("scipy", 3e-3, 3e-3), _timed("torch-csr-i32", 2e-3, 2.4e-3),
               _timed("torch-dense", 0.5e-3),  # fastest, but not a CPU *library* reference
               _timed("sparsetir-csr", 4e-3, dataset="pubmed"), _timed("scipy", 2e-3, dataset="pubmed")]
    frame = speedup_frame(records, SPMM, "spmm")
    cora = _row(frame, "sparsetir-csr")
    assert cora.best_cpu_library == "torch-csr-i32" and cora.reference == "torch-csr-i32"
    assert cora.speedup_vs_reference == pytest.approx(2.0)
    assert cora.speedup_vs_reference_mean == pytest.approx(2.4 / 1.2)
    assert _row(frame, "sparsetir-csr", "pubmed").speedup_vs_best_cpu == pytest.approx(0.5)
    assert _row(frame, "scipy", "pubmed").speedup_vs_reference == pytest.approx(1.0)


def test_bandwidth_fraction_uses_the_min_bytes_model_and_the_copy_bandwidth():
    frame = speedup_frame([_timed("scipy", 1e-3, min_bytes=4_000_000, copy=8e9)], SPMM, "spmm")
    row = _row(frame, "scipy")
    assert row.gbytes_per_s == pytest.approx(4.0)
    assert row.dram_fraction == pytest.approx(0.5)


def test_sddmm_is_normalised_to_sampled_addmm_with_dgl_as_a_column():
    records = [_timed("sparsetir-csr", 1e-3, experiment="sddmm"), _timed("torch-sampled-addmm", 4e-3, experiment="sddmm"),
               _timed("dgl-gsddmm", 8e-3, experiment="sddmm"), _timed("scipy", 2e-3, experiment="sddmm")]
    frame = speedup_frame(records, SDDMM, "sddmm")
    assert _row(frame, "sparsetir-csr").speedup_vs_reference == pytest.approx(4.0)
    assert _row(frame, "dgl-gsddmm").speedup_vs_reference == pytest.approx(0.5)
    assert _row(frame, "sparsetir-csr").speedup_vs_best_cpu == pytest.approx(2.0)  # scipy is the best here
    table = wide_table(frame, "speedup_vs_reference")
    assert list(table.columns) == ["device", "dataset", "feat", "sparsetir-csr", "torch-sampled-addmm", "dgl-gsddmm",
                                   "scipy", "note"]
    assert table.iloc[0]["sparsetir-csr"] == "4.00× (4.00–4.00)"


def test_merged_gpu_records_are_normalised_to_cusparse():
    records = [_timed("scipy", 3e-3), _timed("torch-csr-i32", 2e-4, device="cuda"),
               _timed("cupy-cusparse", 1e-4, device="cuda")]
    frame = speedup_frame(records, SPMM, "spmm")
    gpu = _row(frame, "cupy-cusparse", device="cuda")
    assert gpu.reference == "torch-csr-i32" and gpu.speedup_vs_reference == pytest.approx(2.0)
    assert math.isnan(gpu.speedup_vs_best_cpu)  # no CPU comparison across devices


def test_unavailable_dataset_and_contender_rows_say_why():
    records = [_timed("sparsetir-csr", 1e-3), _timed("scipy", 2e-3),
               _missing("sparsetir-hyb", "unavailable: NotImplementedError: hyb arrives with the formats issue"),
               _missing("*", "unavailable: no route to reddit", dataset="reddit"),
               _missing("*", "unavailable: no route to reddit", dataset="reddit", feat=64)]
    frame = speedup_frame(records, SPMM, "spmm")
    table = wide_table(frame, "speedup_vs_reference", dataset_order=["cora", "reddit"])
    (reddit,) = [row for _, row in table[table.dataset == "reddit"].iterrows()]  # one row for both sizes
    assert reddit["feat"] == "32, 64"
    assert reddit["note"] == "unavailable: no route to reddit" and reddit["scipy"] == "unavailable"
    assert table[table.dataset == "cora"].iloc[0]["sparsetir-hyb"] == "unavailable"
    text = markdown_report(frame, SPMM, "spmm", ["cora", "reddit"])
    assert "hyb arrives with the formats issue" in text and "no route to reddit" in text
    assert "## Did not run" in text


def test_geomean_row_and_geomean():
    assert geomean(pd.Series([2.0, 8.0, float("nan")])) == pytest.approx(4.0)
    assert math.isnan(geomean(pd.Series([float("nan")])))
    records = [_timed("sparsetir-csr", 1e-3, feat=f) for f in (32, 64)] + [
        _timed("scipy", 2e-3, feat=32), _timed("scipy", 8e-3, feat=64)]
    table = wide_table(speedup_frame(records, SPMM, "spmm"), "speedup_vs_reference")
    assert table.iloc[-1]["dataset"] == "geomean" and table.iloc[-1]["sparsetir-csr"] == "4.00× (4.00–4.00)"


def test_a_later_record_replaces_an_earlier_one_for_the_same_case():
    frame = speedup_frame([_timed("scipy", 5e-3), _timed("sparsetir-csr", 1e-3), _timed("scipy", 2e-3)], SPMM, "spmm")
    assert _row(frame, "sparsetir-csr").speedup_vs_reference == pytest.approx(2.0)


def test_no_records_is_an_error():
    with pytest.raises(ValueError, match="no records"):
        speedup_frame([], SPMM, "spmm")
    with pytest.raises(ValueError, match="no records of experiment 'sddmm'"):
        speedup_frame([_timed("scipy", 1e-3)], SPMM, "sddmm")


def test_tables_and_figures_are_written(tmp_path):
    records = [_timed("sparsetir-csr", 1e-3, feat=f, dataset=d) for f in (32, 64) for d in ("cora", "pubmed")] + [
        _timed("scipy", 2e-3, feat=f, dataset=d) for f in (32, 64) for d in ("cora", "pubmed")]
    frame = write_tables(records, SPMM, "spmm", tmp_path / "s.csv", tmp_path / "s.md", tmp_path / "s.tex")
    assert pd.read_csv(tmp_path / "s.csv").shape[0] == len(frame) == 8
    assert "\\begin{tabular}" in (tmp_path / "s.tex").read_text()
    assert "| geomean" in (tmp_path / "s.md").read_text()
    bar_figure(frame, tmp_path / "bars.png", "spmm")
    roofline_figure(frame, tmp_path / "roofline.png", "spmm")
    for name in ("bars.png", "roofline.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
