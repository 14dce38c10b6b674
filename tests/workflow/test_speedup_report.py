"""The speedup tables as a reader sees them: the whole Markdown report and LaTeX table of small record sets.

Each expected text was checked by hand against the records: the ratios of medians (the samples of
every record spread alike, so each round's ratio is the same and every interval is a point), the
reference per device, the headline's wins and losses, a contender and a dataset that did not run, the
geometric-mean row and the bandwidth model.
"""

from __future__ import annotations

import json
import math
import warnings

import pandas as pd
import pytest
from speedup_tables import (
    geomean,
    headline_table,
    latex_table,
    markdown_report,
    missing_reference_notes,
    not_run_table,
    records_frame,
    speedup_frame,
    wide_table,
    write_summary,
    write_tables,
)
from test_speedup_tables import SDDMM, SPMM, _missing, _row, _timed

from sparsetir.bench.report.summary import interference_paragraph

SPMM_RECORDS = [
    _timed("sparsetir-csr", 1e-3, 1.2e-3, min_bytes=4_000_000, copy=8e9),
    _timed("scipy", 3e-3, 3.3e-3, min_bytes=4_000_000, copy=8e9),
    _timed("torch-csr-i32", 2e-3, 2.4e-3, min_bytes=4_000_000, copy=8e9),
    _timed("sparsetir-csr", 4e-3, feat=64, min_bytes=8_000_000, copy=1.2e10),
    _timed("scipy", 2e-3, feat=64, min_bytes=8_000_000, copy=1.2e10),
    _missing("torch-csr-i32", "unavailable: torch lacks int32 CSR here", feat=64),
    _timed("torch-csr-i32", 5e-4, device="cuda", copy=None),
    _timed("sparsetir-csr", 2.5e-4, 4e-4, device="cuda", copy=None),
    _missing("*", "unavailable: no route to reddit", dataset="reddit"),
    _missing("*", "unavailable: no route to reddit", dataset="reddit", feat=64),
]

SPMM_REPORT = """\
# spmm: speedup over the reference

Reference (cpu: the best CPU library per case; cuda: torch-csr-i32). Each cell is the ratio of median times \
(> 1: faster than the reference) with its 90% bootstrap interval over the interleaved rounds; "tie" marks an \
interval that straddles 1.
Copy bandwidth measured in the same runs: 8.0 GB/s (median over cases).

2 of 4 cases on cpu have no reference time: none of the CPU libraries (scipy, torch-csr-i32) was timed. Those \
speedups are n/a; the reasons are under "Did not run".

## Headline

| contender     | geomean           |   wins |   ties |   losses |   cases |
|:--------------|:------------------|-------:|-------:|---------:|--------:|
| sparsetir-csr | 1.26× (1.26–1.26) |      2 |      0 |        1 |       3 |

## Speedup over the reference

| device   | dataset   | feat   | sparsetir-csr     | scipy                 | torch-csr-i32         | note    \
                          |
|:---------|:----------|:-------|:------------------|:----------------------|:----------------------|:----------------------------------|
| cpu      | reddit    | 32, 64 | unavailable       | unavailable           | unavailable           | \
unavailable: no route to reddit   |
| cpu      | cora      | 32     | 2.00× (2.00–2.00) | 0.67× (0.67–0.67)     | 1.00× (1.00–1.00) tie |         \
                          |
| cpu      | cora      | 64     | 0.50× (0.50–0.50) | 1.00× (1.00–1.00) tie | unavailable           |         \
                          |
| cuda     | cora      | 32     | 2.00× (2.00–2.00) | n/a                   | 1.00× (1.00–1.00) tie |         \
                          |
|          | geomean   |        | 1.26× (1.26–1.26) | 0.82× (0.82–0.82)     | 1.00× (1.00–1.00) tie | over \
the cases each contender ran |

## Achieved fraction of copy bandwidth (min-bytes model)

| device   | dataset   |   feat |   sparsetir-csr |   scipy |   torch-csr-i32 |
|:---------|:----------|-------:|----------------:|--------:|----------------:|
| cpu      | cora      |     32 |           0.5   |   0.167 |            0.25 |
| cpu      | cora      |     64 |           0.167 |   0.333 |          nan    |

## Did not run

| contender     | status      |   cases | reason                                  |
|:--------------|:------------|--------:|:----------------------------------------|
| *             | unavailable |       2 | unavailable: no route to reddit         |
| torch-csr-i32 | unavailable |       1 | unavailable: torch lacks int32 CSR here |
"""

SPMM_LATEX = r"""\begin{tabular}{llllll}
\toprule
device & dataset & feat & sparsetir-csr & scipy & torch-csr-i32 \\
\midrule
cpu & cora & 32 & 2.00× (2.00–2.00) & 0.67× (0.67–0.67) & 1.00× (1.00–1.00) tie \\
cpu & cora & 64 & 0.50× (0.50–0.50) & 1.00× (1.00–1.00) tie & unavailable \\
cpu & reddit & 32, 64 & unavailable & unavailable & unavailable \\
cuda & cora & 32 & 2.00× (2.00–2.00) & n/a & 1.00× (1.00–1.00) tie \\
 & geomean &  & 1.26× (1.26–1.26) & 0.82× (0.82–0.82) & 1.00× (1.00–1.00) tie \\
\bottomrule
\end{tabular}
"""

SDDMM_RECORDS = [
    _timed("sparsetir-csr", 1e-3, 1.5e-3, experiment="sddmm", copy=None),
    _timed("torch-sampled-addmm", 4e-3, experiment="sddmm", copy=None),
    _timed("dgl-gsddmm", 8e-3, 6e-3, experiment="sddmm", copy=None),
    _timed("scipy", 2e-3, 3e-3, experiment="sddmm", copy=None),
]

SDDMM_REPORT = """\
# sddmm: speedup over the reference

Reference (cpu: torch-sampled-addmm). Each cell is the ratio of median times (> 1: faster than the reference) \
with its 90% bootstrap interval over the interleaved rounds; "tie" marks an interval that straddles 1.

## Headline

| contender     | geomean           |   wins |   ties |   losses |   cases |
|:--------------|:------------------|-------:|-------:|---------:|--------:|
| sparsetir-csr | 4.00× (4.00–4.00) |      1 |      0 |        0 |       1 |

## Speedup over the reference

| device   | dataset   |   feat | sparsetir-csr     | torch-sampled-addmm   | dgl-gsddmm        | scipy       \
      | note                              |
|:---------|:----------|-------:|:------------------|:----------------------|:------------------|:------------------|:----------------------------------|
| cpu      | cora      |     32 | 4.00× (4.00–4.00) | 1.00× (1.00–1.00) tie | 0.50× (0.50–0.50) | 2.00× \
(2.00–2.00) |                                   |
|          | geomean   |        | 4.00× (4.00–4.00) | 1.00× (1.00–1.00) tie | 0.50× (0.50–0.50) | 2.00× \
(2.00–2.00) | over the cases each contender ran |

## Speedup over the best CPU library of each case

| device   | dataset   |   feat | sparsetir-csr     | torch-sampled-addmm   | dgl-gsddmm        | scipy       \
          | note                              |
|:---------|:----------|-------:|:------------------|:----------------------|:------------------|:----------------------|:----------------------------------|
| cpu      | cora      |     32 | 2.00× (2.00–2.00) | 0.50× (0.50–0.50)     | 0.25× (0.25–0.25) | 1.00× \
(1.00–1.00) tie |                                   |
|          | geomean   |        | 2.00× (2.00–2.00) | 0.50× (0.50–0.50)     | 0.25× (0.25–0.25) | 1.00× \
(1.00–1.00) tie | over the cases each contender ran |

## Achieved fraction of copy bandwidth (min-bytes model)

| device   | dataset   | feat   |
|----------|-----------|--------|

## Did not run

(none)
"""


def test_the_spmm_report_reads_as_checked():
    frame = speedup_frame(SPMM_RECORDS, SPMM, "spmm")
    assert markdown_report(frame, SPMM, "spmm", ["reddit", "cora"]) == SPMM_REPORT


def test_the_spmm_latex_table_reads_as_checked():
    frame = speedup_frame(SPMM_RECORDS, SPMM, "spmm")
    assert latex_table(frame, ["cora", "reddit"]) == SPMM_LATEX


def test_a_fixed_cpu_reference_adds_the_table_over_the_best_cpu_library():
    frame = speedup_frame(SDDMM_RECORDS, SDDMM, "sddmm")
    assert markdown_report(frame, SDDMM, "sddmm") == SDDMM_REPORT


def test_the_long_table_has_one_row_per_record_with_its_times_and_model():
    record = _timed("scipy", 2e-3, 2.5e-3, min_bytes=4_000_000, copy=8e9)
    record["times"] = {"convert_s": 0.5, "compile_s": 1.5, "tune_s": 7.0}
    frame = speedup_frame([record], SPMM, "spmm")
    assert list(frame.columns) == [
        "experiment", "device", "dataset", "feat", "contender", "variant", "status", "reason", "nnz", "min_bytes",
        "flops", "copy_bytes_per_s", "median_s", "mean_s", "p20_s", "p80_s", "samples", "samples_s", "convert_s",
        "compile_s", "tune_s", "best_cpu_library", "reference", "speedup_vs_reference", "speedup_vs_reference_mean",
        "speedup_vs_best_cpu", "speedup_vs_best_cpu_mean", "speedup_vs_reference_low", "speedup_vs_reference_high",
        "speedup_vs_reference_verdict", "speedup_vs_best_cpu_low", "speedup_vs_best_cpu_high",
        "speedup_vs_best_cpu_verdict", "gbytes_per_s", "dram_fraction"]
    row = _row(frame, "scipy")
    assert (row.median_s, row.mean_s, row.p20_s, row.p80_s, row.samples) == pytest.approx((2e-3, 2.5e-3, 1.8e-3, 2.2e-3, 3))
    assert (row.convert_s, row.compile_s, row.tune_s) == (0.5, 1.5, 7.0)
    assert (row.min_bytes, row.flops, row.copy_bytes_per_s) == (4_000_000, 8_000_000, 8e9)
    assert row.best_cpu_library == row.reference == "scipy"


def test_the_long_table_keeps_the_speedups_of_the_means_and_each_verdict():
    frame = speedup_frame(SPMM_RECORDS, SPMM, "spmm")
    columns = ["speedup_vs_reference_mean", "speedup_vs_best_cpu_mean", "speedup_vs_reference_verdict",
               "speedup_vs_best_cpu_verdict"]
    got = {(row.device, row.feat, row.contender): [row[c] for c in columns] for _, row in frame.iterrows()}
    # means: cpu F=32 sparsetir 1.2 ms, scipy 3.3, torch 2.4 (the best library); cuda sparsetir 0.4, torch 0.5
    assert got[("cpu", 32, "sparsetir-csr")] == [pytest.approx(2.0), pytest.approx(2.0), "win", "win"]
    assert got[("cpu", 32, "scipy")] == [pytest.approx(2.4 / 3.3), pytest.approx(2.4 / 3.3), "loss", "loss"]
    assert got[("cpu", 32, "torch-csr-i32")] == [pytest.approx(1.0), pytest.approx(1.0), "tie", "tie"]
    assert got[("cpu", 64, "sparsetir-csr")] == [pytest.approx(0.5), pytest.approx(0.5), "loss", "loss"]
    assert got[("cuda", 32, "sparsetir-csr")][0] == pytest.approx(1.25) and got[("cuda", 32, "sparsetir-csr")][2] == "win"
    assert math.isnan(got[("cuda", 32, "sparsetir-csr")][1]) and got[("cuda", 32, "sparsetir-csr")][3] == "n/a"
    assert math.isnan(got[("cpu", 64, "torch-csr-i32")][0]) and got[("cpu", 64, "torch-csr-i32")][2] == "n/a"


def test_records_without_stats_or_times_still_make_rows():
    frame = records_frame([_missing("scipy", "unavailable: no scipy")])
    assert frame.loc[0, "status"] == "unavailable"
    assert math.isnan(frame.loc[0, "median_s"]) and math.isnan(frame.loc[0, "tune_s"])


def test_a_record_of_another_experiment_does_not_hide_one_of_this_experiment():
    records = SDDMM_RECORDS + [_timed("sparsetir-csr", 9e-3, experiment="spmm")]  # the same case, another op
    frame = speedup_frame(records, SDDMM, "sddmm")
    assert _row(frame, "sparsetir-csr").speedup_vs_reference == pytest.approx(4.0)


def test_a_timed_contender_whose_case_has_no_reference_reads_n_a():
    frame = speedup_frame([_timed("sparsetir-csr", 1e-3, dataset="pubmed"), _timed("scipy", 2e-3)], SPMM, "spmm")
    table = wide_table(frame, "speedup_vs_reference")
    pubmed = table[table.dataset == "pubmed"].iloc[0]
    assert pubmed["sparsetir-csr"] == "n/a" and pubmed["scipy"] == "n/a"  # timed but no reference; not run


def test_a_record_without_a_mean_still_reads_its_ratio_of_medians():
    record = _timed("sparsetir-csr", 1e-3)
    record["stats"] = {key: value for key, value in record["stats"].items() if key != "mean"}
    frame = speedup_frame([record, _timed("scipy", 3e-3)], SPMM, "spmm")
    assert wide_table(frame, "speedup_vs_reference").iloc[0]["sparsetir-csr"] == "3.00× (3.00–3.00)"


def test_latex_escapes_special_characters_and_keeps_the_dataset_order():
    records = [_timed("scipy", 2e-3, dataset="web_google"), _timed("scipy", 2e-3, dataset="cora")]
    text = latex_table(speedup_frame(records, SPMM, "spmm"), ["web_google", "cora"])
    assert text.index(r"cpu & web\_google & 32") < text.index("cpu & cora & 32")
    assert "web_google" not in text


def test_nothing_that_did_not_run_is_an_empty_table_with_its_columns():
    table = not_run_table(speedup_frame([_timed("scipy", 2e-3)], SPMM, "spmm"))
    assert table.empty and list(table.columns) == ["contender", "status", "cases", "reason"]


@pytest.mark.parametrize(("values", "expected"), [
    ([2.0, 8.0], 4.0),
    ([2.0, 8.0, math.inf], 4.0),
    ([4.0, -1.0], 4.0),
    ([4.0, 0.0], 4.0),
    ([0.5, 2.0], 1.0),  # a slowdown counts: only values <= 0 (and not finite) are left out
])
def test_the_geometric_mean_takes_the_finite_positive_values(values, expected):
    assert geomean(pd.Series(values)) == pytest.approx(expected)


def test_the_geometric_mean_of_nothing_is_nan_without_a_numpy_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(geomean(pd.Series([math.nan, 0.0])))


def test_the_headline_has_every_sparsetir_contender_whatever_comes_before_it():
    records = [_timed("scipy", 2e-3), _timed("sparsetir-csr", 1e-3), _timed("torch-csr-i32", 4e-3),
               _timed("sparsetir-ell", 4e-3)]
    table = headline_table(speedup_frame(records, SPMM, "spmm"), "speedup_vs_reference")
    assert table["contender"].tolist() == ["sparsetir-csr", "sparsetir-ell"]
    assert table[["wins", "ties", "losses", "cases"]].values.tolist() == [[1, 0, 0, 1], [0, 0, 1, 1]]


def test_a_headline_without_a_sparsetir_contender_is_an_empty_table_with_its_columns():
    table = headline_table(speedup_frame([_timed("scipy", 2e-3)], SPMM, "spmm"), "speedup_vs_reference")
    assert table.empty and list(table.columns) == ["contender", "geomean", "wins", "ties", "losses", "cases"]


def test_both_speedup_tables_keep_the_given_dataset_order():
    records = [_timed(contender, median, experiment="sddmm", dataset=dataset, copy=None)
               for dataset in ("cora", "ppi") for contender, median in (("sparsetir-csr", 1e-3), ("scipy", 4e-3))]
    settings = {"reference": {"cpu": "scipy"}, "cpu_libraries": ["scipy"]}
    text = markdown_report(speedup_frame(records, settings, "sddmm"), settings, "sddmm", ["ppi", "cora"])
    over_reference, over_best = text.split("## Speedup over the best CPU library of each case")
    for table in (over_reference, over_best):
        assert table.index("| cpu      | ppi ") < table.index("| cpu      | cora ")


def test_write_tables_keeps_one_experiment_in_the_given_order(tmp_path):
    records = SPMM_RECORDS + [_timed("sparsetir-csr", 1e-3, experiment="sddmm", dataset="ppi")]
    paths = {ext: tmp_path / f"speedup.{ext}" for ext in ("csv", "md", "tex")}
    frame = write_tables(records, SPMM, "spmm", paths["csv"], paths["md"], paths["tex"], ["reddit", "cora"])
    assert set(frame["experiment"]) == {"spmm"}
    csv = pd.read_csv(paths["csv"])
    assert list(csv.columns) == [c for c in frame.columns if c != "samples_s"]  # the samples stay in the records
    assert len(csv) == len(frame) == len(SPMM_RECORDS)
    assert paths["md"].read_text() == SPMM_REPORT + interference_paragraph(records)
    assert paths["md"].read_text().endswith("rounds: 0 run, none judged (4 cases timed without the sentinel, or "
                                            "recorded before it).\n")
    assert paths["tex"].read_text() == latex_table(frame, ["reddit", "cora"])
    assert paths["tex"].read_text().index("reddit") < paths["tex"].read_text().index("cora")


def test_each_unavailable_dataset_keeps_its_own_row():
    records = [_timed("scipy", 2e-3), _missing("*", "unavailable: no route to reddit", dataset="reddit"),
               _missing("*", "unavailable: no route to ppi", dataset="ppi"),
               _missing("*", "unavailable: no route to ppi", dataset="ppi", feat=64)]
    table = wide_table(speedup_frame(records, SPMM, "spmm"), "speedup_vs_reference")
    assert table[["dataset", "feat", "note"]].values.tolist() == [
        ["cora", 32, ""], ["reddit", 32, "unavailable: no route to reddit"],
        ["ppi", "32, 64", "unavailable: no route to ppi"], ["geomean", "", "over the cases each contender ran"]]


NOTE_TAIL = ' Those speedups are n/a; the reasons are under "Did not run".'


def test_a_device_whose_reference_was_not_timed_is_explained_after_a_complete_one():
    records = [_timed("scipy", 2e-3), _timed("sparsetir-csr", 1e-3, device="cuda", copy=None)]
    frame = speedup_frame(records, SPMM, "spmm")
    assert missing_reference_notes(frame, SPMM) == [
        "No case on cuda has a reference time: the reference, torch-csr-i32, was not timed." + NOTE_TAIL]


def test_no_dataset_at_all_is_explained():
    records = [_missing("*", "unavailable: no route to reddit", dataset="reddit")]
    frame = speedup_frame(records, SPMM, "spmm")
    assert missing_reference_notes(frame, SPMM) == [
        "No case on cpu has a reference time: no dataset could be prepared." + NOTE_TAIL]


def test_cpu_libraries_that_no_record_names_are_listed():
    settings = {"reference": {"cpu": "best-cpu-library"}, "cpu_libraries": ["scipy", "mkl", "cusparse-cpu"]}
    records = [_timed("sparsetir-csr", 1e-3), _missing("scipy", "unavailable: broken")]
    frame = speedup_frame(records, settings, "spmm")
    assert missing_reference_notes(frame, settings) == [
        "No case on cpu has a reference time: none of the CPU libraries (scipy, mkl, cusparse-cpu) was timed; "
        "no record comes from mkl, cusparse-cpu (not a variant of a configured baseline)." + NOTE_TAIL]


def test_a_device_without_a_configured_reference_reads_a_question_mark():
    settings = {"reference": {"cpu": "scipy"}, "cpu_libraries": ["scipy"]}
    records = [_timed("scipy", 2e-3), _timed("sparsetir-csr", 1e-3, device="cuda", copy=None)]
    frame = speedup_frame(records, settings, "spmm")
    text = markdown_report(frame, settings, "spmm")
    assert "Reference (cpu: scipy; cuda: ?). Each cell is the ratio of median times" in text
    assert "No case on cuda has a reference time: the reference, ?, was not timed." + NOTE_TAIL in text
    assert math.isnan(_row(frame, "sparsetir-csr", device="cuda").speedup_vs_reference)


def test_no_records_is_refused_by_name():
    with pytest.raises(ValueError, match="^no records to aggregate$"):
        records_frame([])


def test_bandwidths_are_in_gigabytes_and_feature_sizes_stay_integers(tmp_path):
    records = [_timed("scipy", 1e-3, min_bytes=4_000_000, copy=8_250_000_005.0)]
    frame = write_tables(records, SPMM, "spmm", tmp_path / "s.csv", tmp_path / "s.md", tmp_path / "s.tex")
    assert _row(frame, "scipy").gbytes_per_s == 4.0
    assert "Copy bandwidth measured in the same runs: 8.3 GB/s (median over cases)." in (tmp_path / "s.md").read_text()
    header, row = (tmp_path / "s.csv").read_text().splitlines()[:2]
    assert header.startswith("experiment,device,dataset,feat,") and row.startswith("spmm,cpu,cora,32,scipy,")


def test_the_summary_judges_sparsetir_against_each_devices_reference(tmp_path):
    records = SPMM_RECORDS + [_timed("sparsetir-csr", 1e-3, experiment="sddmm", dataset="ppi")]  # another experiment
    summary = write_summary(records, SPMM, "spmm", tmp_path / "summary.json")
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert (summary["experiment"], summary["title"]) == ("spmm", "SpMM (Y = A X)")
    assert [(row["device"], row["versus"], row["geomean"], row["wins"], row["losses"], row["cases"])
            for row in summary["headline"]] == [("cpu", "the best of 2 libraries per case", 1.0, 1, 1, 2),
                                                 ("cuda", "torch-csr-i32", 2.0, 1, 0, 1)]
    assert [(case["case"], case["versus"], case["speedup"]) for case in summary["cases"]] == [
        ("cora F=32 (cpu)", "torch-csr-i32", 2.0), ("cora F=64 (cpu)", "scipy", 0.5),
        ("cora F=32 (cuda)", "torch-csr-i32", 2.0)]
    assert [(row["case"], row["contender"]) for row in summary["pending"]] == [
        ("cora F=64 (cpu)", "torch-csr-i32"), ("reddit F=32 (cpu)", "*"), ("reddit F=64 (cpu)", "*")]
    assert summary["tables"] == ["speedup.md", "speedup.csv"]
    assert summary["figures"] == ["figures/speedup_bars.png", "figures/roofline.png"]
    assert "ppi" not in json.dumps(summary)


def test_the_sddmm_summary_is_titled_and_judged_against_its_fixed_reference(tmp_path):
    summary = write_summary(SDDMM_RECORDS, SDDMM, "sddmm", tmp_path / "summary.json")
    assert summary["title"] == "SDDMM (A ⊙ (X Yᵀ))"
    assert [(row["versus"], row["geomean"], row["cases"]) for row in summary["headline"]] == [
        ("torch-sampled-addmm", 4.0, 1)]
    assert write_summary(SDDMM_RECORDS, SDDMM, "conv", tmp_path / "other.json")["title"] == "conv"
