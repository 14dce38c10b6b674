"""The end-of-run screen names every dataset the run could not get, grouped by reason (issue 29)."""

from __future__ import annotations

from sparsetir.bench.report.endrun import screen
from sparsetir.data.availability import SURVEY_FILE, Row, write_survey


def test_the_end_screen_names_every_unavailable_dataset_grouped_by_reason(tmp_path):
    rows = [Row("cora", ["spmm"], "found", routes=["embedded"]),
            Row("reddit", ["spmm", "sddmm"], "unavailable", why="disabled"),
            Row("bgs", ["rgcn"], "unavailable", why="disabled"),
            Row("dblp", ["sage"], "unavailable", why="no-network", detail="raw.githubusercontent.com:443: no name")]
    write_survey(tmp_path / SURVEY_FILE, rows, data={"cache": str(tmp_path / "cache")})
    lines = screen(tmp_path).splitlines()
    start = lines.index("Data it could not get (3 datasets; their rows say unavailable):")
    disabled, offline = lines[start + 1], lines[start + 2]
    assert "downloads are disabled" in disabled and "reddit [spmm, sddmm], bgs [rgcn]" in disabled
    assert "no network (raw.githubusercontent.com:443: no name): dblp [sage]" in offline
    assert lines[start + 3].startswith("Elapsed:")


def test_the_end_screen_says_when_it_got_everything_or_cannot_tell(tmp_path):
    assert any(line.startswith("Data it could not get: not known (") for line in screen(tmp_path).splitlines())
    write_survey(tmp_path / SURVEY_FILE, [Row("cora", ["spmm"], "found", routes=["embedded"])])
    assert "Data it could not get: nothing" in screen(tmp_path).splitlines()
    (tmp_path / SURVEY_FILE).write_text("{")
    assert any("unreadable data survey" in line for line in screen(tmp_path).splitlines())
