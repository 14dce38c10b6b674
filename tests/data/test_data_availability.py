"""The data survey: every dataset's routes asked before a run, one table, and at the end every dataset
the run could not get, grouped by reason (issue 29, item 3). Servers are on 127.0.0.1 only."""

from __future__ import annotations

import hashlib
import json
import socket

import pytest

from sparsetir import data
from sparsetir.data.availability import (
    NETWORK_CHECK_ENV,
    WHY,
    Need,
    Row,
    format_groups,
    format_table,
    missing_at_end,
    read_survey,
    survey,
    write_survey,
)
from sparsetir.data.download import unreachable
from sparsetir.data.registry import DataFile

PAYLOAD = b"0 1\n1 2\n"
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def listening():
    """A TCP socket listening on 127.0.0.1; yields an http URL on it (nothing is ever requested)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"http://127.0.0.1:{server.getsockname()[1]}/g.txt"


@pytest.fixture
def closed_port_url():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/g.txt"  # nothing listens there any more


def _need(name, url=None, relpath="x/g.txt", users=("spmm",)):
    return Need(name, (DataFile(relpath, DIGEST, len(PAYLOAD), url),), users)


def test_unreachable_says_why_and_requests_nothing(listening, closed_port_url):
    assert unreachable(listening, timeout=5) is None
    assert "127.0.0.1" in unreachable(closed_port_url, timeout=5)
    assert "not an http(s) URL" in unreachable("ftp://example.invalid/x")


def test_a_survey_finds_embedded_data_and_says_why_the_rest_is_out_of_reach(isolated_data, monkeypatch, tmp_path):
    embedded = tmp_path / "embedded"
    (embedded / "x").mkdir(parents=True)
    (embedded / "x" / "g.txt").write_bytes(PAYLOAD)
    monkeypatch.setenv(data.EMBEDDED_ENV, str(embedded))
    rows = survey([_need("here"), _need("gone", "http://127.0.0.1:9/h.txt", "x/h.txt", ("rgcn", "sage")),
                   _need("nowhere", None, "x/i.txt")], allow_download=False)
    here, gone, nowhere = rows
    assert (here.status, here.routes, here.tried) == ("found", ["embedded"], ["embedded: found"])
    assert (gone.status, gone.why, gone.used_by) == ("unavailable", "disabled", ["rgcn", "sage"])
    assert gone.tried == ["embedded: not there; cache: not there; mirror: none; download: off"]
    assert (nowhere.status, nowhere.why) == ("unavailable", "no-url")
    table = format_table(rows)
    assert table.splitlines()[0].endswith("3 datasets, 1 found, 0 to download, 2 unavailable")
    assert "found: embedded 1 (here)" in table
    header = next(line for line in table.splitlines() if "routes tried" in line)
    assert header.split() == ["dataset", "used", "by", "routes", "tried", "why", "unavailable"]
    assert any(line.split()[:2] == ["gone", "rgcn,"] and line.endswith(WHY["disabled"]) for line in table.splitlines())
    listed = [line.split()[0] for line in table.split("routes tried", 1)[1].splitlines()[1:3]]
    assert listed == ["gone", "nowhere"]  # the found datasets are not in the table


def test_the_network_check_turns_a_download_into_unavailable_only_when_the_server_cannot_be_reached(
        isolated_data, monkeypatch, listening, closed_port_url):
    monkeypatch.setenv(NETWORK_CHECK_ENV, "1")
    up, down = survey([_need("up", listening, "x/a.txt"), _need("down", closed_port_url, "x/b.txt")],
                      allow_download=True)
    assert (up.status, up.urls, up.why) == ("download", [listening], None)
    assert up.tried[0].endswith("download: to do")
    assert (down.status, down.why) == ("unavailable", "no-network") and "127.0.0.1" in down.detail
    assert down.tried[0].endswith("download: no network")
    assert "to be downloaded from 127.0.0.1" in format_table([up, down])
    monkeypatch.setenv(NETWORK_CHECK_ENV, "0")  # as in the tests: not checked, so a download to come
    (unchecked,) = survey([_need("down", closed_port_url, "x/b.txt")], allow_download=True)
    assert unchecked.status == "download"
    assert not (isolated_data / "x").exists()  # nothing was downloaded


def test_a_refused_copy_is_its_own_reason(isolated_data, monkeypatch, tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "x").mkdir(parents=True)
    (mirror / "x" / "g.txt").write_bytes(PAYLOAD[:-1] + b"!")
    monkeypatch.setenv(data.MIRROR_ENV, str(mirror))
    (row,) = survey([_need("bad", "http://127.0.0.1:9/g.txt")], allow_download=False)
    assert (row.status, row.why) == ("unavailable", "refused") and "checksum mismatch" in row.detail
    assert "mirror: refused" in row.tried[0]
    assert (mirror / "x" / "g.txt").exists()


def test_the_survey_round_trips_and_the_end_names_every_dataset_it_could_not_get(tmp_path):
    cache = tmp_path / "cache"
    (cache / "d").mkdir(parents=True)
    (cache / "d" / "arrived.txt").write_bytes(PAYLOAD)
    rows = [Row("cora", ["spmm"], "found", routes=["embedded"], files=["planetoid/ind.cora.graph"]),
            Row("reddit", ["spmm", "sddmm"], "unavailable", why="no-network", detail="data.dgl.ai:443: no name",
                files=["dgl/reddit.zip"]),
            Row("ppi", ["spmm"], "unavailable", why="no-network", detail="data.dgl.ai:443: no name"),
            Row("bgs", ["rgcn"], "unavailable", why="disabled"),
            Row("arrived", ["sage"], "download", files=["d/arrived.txt"], urls=["http://x/a"]),
            Row("lost", ["sage"], "download", files=["d/lost.txt"], urls=["http://x/l"])]
    path = write_survey(tmp_path / "results" / "data_availability.json", rows, data={"cache": str(cache)})
    kept, back = read_survey(path)
    assert kept == {"cache": str(cache)} and [row.dataset for row in back] == [row.dataset for row in rows]
    missing = missing_at_end(path)
    assert [row.dataset for row in missing] == ["reddit", "ppi", "bgs", "lost"]
    lines = format_groups(missing)
    assert len(lines) == 3  # one line per reason, every dataset named
    assert lines[0].split()[0] == "1" and "downloads are disabled" in lines[0] and "bgs [rgcn]" in lines[0]
    assert "no network (data.dgl.ai:443: no name)" in lines[1] and "reddit [spmm, sddmm], ppi [spmm]" in lines[1]
    assert "did not bring it" in lines[2] and "lost [sage]" in lines[2] and "d/lost.txt" in lines[2]


@pytest.mark.parametrize("damage", [
    lambda doc: "not json {",
    lambda doc: json.dumps([]),
    lambda doc: json.dumps({**doc, "version": 99}),
    lambda doc: json.dumps({**doc, "rows": [{"dataset": "x"}]}),
    lambda doc: json.dumps({**doc, "rows": [{**doc["rows"][0], "status": "maybe"}]}),
    lambda doc: json.dumps({**doc, "rows": [{**doc["rows"][0], "used_by": [1]}]}),
    lambda doc: json.dumps({**doc, "rows": [{**doc["rows"][0], "why": 3}]}),
])
def test_a_damaged_survey_is_refused_with_its_name(tmp_path, damage):
    path = write_survey(tmp_path / "s.json", [Row("bgs", ["rgcn"], "unavailable", why="disabled")])
    path.write_text(damage(json.loads(path.read_text())))
    with pytest.raises(ValueError, match="s.json"):
        read_survey(path)
