"""Resolution embedded -> cache -> mirror -> download: progress, resume, sha256, pins, refusal.

Downloads are served by a small HTTP server on 127.0.0.1 inside the test; nothing leaves the machine.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading

import numpy as np
import pytest

from sparsetir import data
from sparsetir.data import DOWNLOAD_ENV, EMBEDDED_ENV, MIRROR_ENV, registry
from sparsetir.data.registry import DataFile, DatasetEntry
from sparsetir.data.resolve import locate

PAYLOAD = b"0 1\n1 2\n2 0\n" * 5000  # an edge list of 3 nodes, 15000 lines
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    honour_range = True
    ranges: list = []

    def do_GET(self):  # noqa: N802 - http.server's naming
        body = self.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        requested = self.headers.get("Range")
        type(self).ranges.append(requested)
        if requested and self.honour_range:
            start = int(requested.removeprefix("bytes=").rstrip("-"))
            if start >= len(body):
                self.send_error(416)
                return
            self.send_response(206)
            body = body[start:]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A loopback HTTP server whose files are ``_Handler.files``; yields its base URL."""
    _Handler.files, _Handler.honour_range, _Handler.ranges = {"/g.txt": PAYLOAD}, True, []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def downloads_on(monkeypatch, isolated_data):
    monkeypatch.setenv(DOWNLOAD_ENV, "1")
    return isolated_data


def test_embedded_folder_serves_the_paper_graphs_without_a_mirror(monkeypatch, tmp_path, fresh_registry_cache):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    monkeypatch.delenv(EMBEDDED_ENV, raising=False)
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "cache"))
    assert data.embedded_dir() is not None
    for name in ("cora", "citeseer", "pubmed"):
        assert data.load(name).shape == data.entry(name).shape


def test_download_verifies_and_lands_in_the_cache(server, downloads_on, capfd):
    file = DataFile("x/g.txt", DIGEST, len(PAYLOAD), server + "/g.txt")
    path = locate(file)
    assert path == downloads_on / "x" / "g.txt" and path.read_bytes() == PAYLOAD
    assert "downloading " + server + "/g.txt" in capfd.readouterr().err  # progress
    assert not (downloads_on / "x" / "g.txt.part").exists()
    _Handler.ranges.clear()
    assert locate(file) == path and _Handler.ranges == []  # the cache answers, no new request


def test_download_resumes_from_a_partial_file(server, downloads_on):
    part = downloads_on / "x" / "g.txt.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(PAYLOAD[:1000])
    path = locate(DataFile("x/g.txt", DIGEST, len(PAYLOAD), server + "/g.txt"))
    assert _Handler.ranges == ["bytes=1000-"]
    assert path.read_bytes() == PAYLOAD


def test_a_server_that_ignores_range_restarts_the_file(server, downloads_on):
    _Handler.honour_range = False
    part = downloads_on / "x" / "g.txt.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"garbage that is not the start of the file")
    assert locate(DataFile("x/g.txt", DIGEST, None, server + "/g.txt")).read_bytes() == PAYLOAD


def test_download_with_a_wrong_checksum_is_deleted_and_refused(server, downloads_on):
    wrong = "0" * 64
    with pytest.raises(ValueError, match=rf"checksum mismatch .*expected sha256 {wrong}, got {DIGEST}.*deleted"):
        locate(DataFile("x/g.txt", wrong, None, server + "/g.txt"))
    assert not any((downloads_on / "x").iterdir())


def test_truncated_download_is_deleted_and_refused(server, downloads_on):
    _Handler.files["/short.txt"] = PAYLOAD[:-10]
    with pytest.raises(ValueError, match="downloaded .* bytes but .* were expected; the file was deleted"):
        locate(DataFile("x/short.txt", DIGEST, len(PAYLOAD), server + "/short.txt"))
    assert not any((downloads_on / "x").iterdir())


def test_unverified_file_is_pinned_on_first_download_then_enforced(server, downloads_on):
    file = DataFile("x/g.txt", None, None, server + "/g.txt")
    path = locate(file)
    pins = json.loads((downloads_on / "pins.json").read_text())
    assert pins["x/g.txt"]["sha256"] == DIGEST and pins["x/g.txt"]["route"] == "download"
    path.write_bytes(PAYLOAD + b"tampered")
    _Handler.files["/g.txt"] = PAYLOAD + b"tampered"  # the server changed too: the pin refuses both copies
    with pytest.raises(ValueError, match=r"checksum mismatch .*\(pinned .*deleted, run again"):
        locate(file)
    assert not path.exists()


def test_corrupt_cached_file_is_deleted(downloads_on):
    cached = downloads_on / "x" / "g.txt"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not it")
    with pytest.raises(ValueError, match="checksum mismatch .*the cached file was deleted"):
        locate(DataFile("x/g.txt", DIGEST, None, None))
    assert not cached.exists()


def test_no_network_is_a_dataset_unavailable_error(downloads_on):
    file = DataFile("x/g.txt", DIGEST, None, "http://127.0.0.1:9/g.txt")  # the discard port: refused
    with pytest.raises(data.DatasetUnavailableError, match=r"download failed: GET http://127\.0\.0\.1:9/g\.txt"):
        locate(file)


def test_a_registered_dataset_loads_through_a_download(server, downloads_on, monkeypatch):
    entry = DatasetEntry("tiny-download", (DataFile("x/g.txt", None, None, server + "/g.txt"),),
                         data.read_edge_list, "graph", False, None, None, "three nodes", "download")
    monkeypatch.setitem(registry._REGISTRY, entry.name, entry)
    matrix = data.load("tiny-download")
    assert matrix.shape == (3, 3) and matrix.nnz == 3
    np.testing.assert_array_equal(matrix.toarray(), [[0, 1, 0], [0, 0, 1], [1, 0, 0]])
