"""The attention benchmark and its tables on a tiny case: every record validates and names its case,
a contender that cannot run gets a record saying why, the tables give each sparsetir contender's
speedup over the fastest reference with the geometric mean and the ratio over SDPA with the mask,
PrunedBERT its best sparse format, and the family summary reads the records."""

import json

import numpy as np
import pytest
import scipy.sparse as sp
from family_summary import write_family_summary

from sparsetir.bench.families.attention import attention_case, prunedbert_case
from sparsetir.bench.records import validate_record
from sparsetir.bench.report.families.attention import write_tables
from sparsetir.data import masks
from sparsetir.timing import TimingPolicy

TINY = TimingPolicy(flush=False, samples=3, min_samples=3, warmup_s=0.0, min_warmup=0, max_time_s=None)


@pytest.fixture(scope="module")
def records():
    layout = masks.longformer(64, 16, 16)
    found = attention_case(case="longformer-seq64", layout=layout, block=16, batch=1, heads=2, seq=64, head_dim=16,
                           contenders={"sparsetir-bsr": {"format": "bsr"}},
                           baselines=["sdpa-dense-mask", "torch-bsr", "no-such-baseline"], timing=TINY,
                           mask="longformer")
    weight = sp.random(48, 64, density=0.1, format="csr", random_state=0)
    found += prunedbert_case(case="random-48x64", matrix=weight, tokens=8, formats={"sparsetir-csr": "csr"},
                             baselines=["torch-dense"], timing=TINY)
    return found


def test_records_validate_name_their_case_and_say_why_not(records):
    by_contender = {r["contender"]: r for r in records}
    assert set(by_contender) == {"sparsetir-bsr", "sdpa-dense-mask", "torch-bsr", "no-such-baseline",
                                 "sparsetir-csr", "torch-dense"}
    for record in records:
        validate_record(record)
        assert record["case"] == record["dataset"] and isinstance(record["setting"], dict)
    assert by_contender["no-such-baseline"]["status"] == "failed"
    assert "unknown sparse_attention baseline" in by_contender["no-such-baseline"]["reason"]
    ours = by_contender["sparsetir-bsr"]
    assert ours["status"] == "ok" and ours["setting"]["relative_error"] <= 1e-5
    assert ours["setting"]["block_sparsity"] == pytest.approx(1 - masks.longformer(64, 16, 16).mean())


def test_tables_and_the_family_summary(records, tmp_path):
    frame = write_tables(records, tmp_path / "speedup.csv", tmp_path / "speedup.md", tmp_path / "speedup.tex",
                         ["sdpa-dense-mask", "torch-bsr"], "torch-dense")
    ours = frame[(frame["experiment"] == "attention") & (frame["contender"] == "sparsetir-bsr")].iloc[0]
    assert ours["reference"] in ("sdpa-dense-mask", "torch-bsr")
    assert ours["speedup_vs_reference"] == pytest.approx(ours["reference_ms"] / ours["median_ms"])
    assert np.isfinite(ours["speedup_vs_sdpa_mask"])
    markdown = (tmp_path / "speedup.md").read_text()
    for text in ("| sparsetir-bsr | geomean", "vs SDPA mask", "Best sparse format per weight", "no-such-baseline"):
        assert text in markdown, text
    assert "tabular" in (tmp_path / "speedup.tex").read_text()
    (tmp_path / "attention" / "records").mkdir(parents=True)
    (tmp_path / "attention" / "records" / "seq64.json").write_text(json.dumps(records))
    summary = write_family_summary(tmp_path, "attention", tmp_path / "summary.json")
    assert [row["contender"] for row in summary["headline"]] == ["sparsetir-bsr"]
