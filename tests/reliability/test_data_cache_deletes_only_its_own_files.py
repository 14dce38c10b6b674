"""The data cache deletes only what lies inside it; digests are pinned only on a download; a
corrupt cached file falls back to a good mirror copy; a corrupt embedded file to the next route.

Issue 13, item 8 (routes). With the cache pointed at the mirror, one corrupt byte used to
delete the mirror's file; an unverified file was pinned from whatever route found it first; and
a corrupt cached file was deleted while the call still failed, although another copy was good.
Issue 29: the embedded folder is the first route (then the cache, the mirror, a download).
"""

from __future__ import annotations

import hashlib
import json
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparsetir import data
from sparsetir.data import CACHE_ENV, EMBEDDED_ENV, MIRROR_ENV
from sparsetir.data.registry import DataFile
from sparsetir.data.resolve import locate

PAYLOAD = b"0 1\n1 2\n2 0\n" * 100
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()
FILE = DataFile("x/g.txt", DIGEST, None, None)


@pytest.fixture
def folders(monkeypatch, tmp_path):
    """Empty cache, embedded and mirror folders, and the routes pointed at them."""
    made = {name: tmp_path / name for name in ("cache", "embedded", "mirror")}
    for folder in made.values():
        folder.mkdir()
    monkeypatch.setenv(CACHE_ENV, str(made["cache"]))
    monkeypatch.setenv(EMBEDDED_ENV, str(made["embedded"]))
    monkeypatch.setenv(MIRROR_ENV, str(made["mirror"]))
    monkeypatch.setenv(data.DOWNLOAD_ENV, "0")
    data.clear_caches()
    yield made
    data.clear_caches()


def _put(folder, content: bytes):
    path = folder / FILE.relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_a_corrupt_file_in_the_mirror_is_refused_not_deleted_when_the_cache_points_at_the_mirror(folders,
                                                                                                  monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(folders["mirror"]))  # the cache and the mirror are one folder
    monkeypatch.setenv(data.DOWNLOAD_ENV, "1")
    mirror_file = _put(folders["mirror"], PAYLOAD[:-1] + b"x")
    file = DataFile(FILE.relpath, DIGEST, None, "http://127.0.0.1:9/g.txt")  # a download would replace it, too
    with pytest.raises(ValueError, match="checksum mismatch .*left in place.*not downloaded: it would replace"):
        locate(file)
    assert mirror_file.read_bytes() == PAYLOAD[:-1] + b"x"


def test_a_cached_symlink_into_the_mirror_is_not_followed_to_a_deletion(folders):
    mirror_file = _put(folders["mirror"], b"corrupt")
    link = folders["cache"] / FILE.relpath
    link.parent.mkdir(parents=True)
    link.symlink_to(mirror_file)
    with pytest.raises(ValueError, match="left in place"):
        locate(FILE)
    assert mirror_file.read_bytes() == b"corrupt"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.integers(0, len(PAYLOAD) - 1), xor=st.integers(1, 255), cut=st.booleans())
def test_a_corrupt_cached_file_is_deleted_and_the_good_mirror_copy_is_used(folders, position, xor, cut):
    damaged = bytearray(PAYLOAD)
    damaged[position] ^= xor
    cached = _put(folders["cache"], PAYLOAD[:position] if cut else bytes(damaged))
    mirrored = _put(folders["mirror"], PAYLOAD)
    with pytest.warns(UserWarning, match=r"the cache copy was refused: checksum mismatch .*using .*mirror") as said:
        assert locate(FILE) == mirrored
    assert len(said) == 1
    assert not cached.exists()  # the cache's own damaged file is gone
    assert mirrored.read_bytes() == PAYLOAD


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.integers(0, len(PAYLOAD) - 1), xor=st.integers(1, 255), cut=st.booleans())
def test_a_corrupt_embedded_file_is_refused_left_alone_and_the_next_route_used(folders, position, xor, cut):
    damaged = bytearray(PAYLOAD)
    damaged[position] ^= xor
    bad = PAYLOAD[:position] if cut else bytes(damaged)
    embedded = _put(folders["embedded"], bad)
    cached = _put(folders["cache"], PAYLOAD)
    with pytest.warns(UserWarning, match=r"the embedded copy was refused: .*left in place.*using .*cache") as said:
        assert locate(FILE) == cached
    assert len(said) == 1
    assert embedded.read_bytes() == bad  # the checkout's file: reported, never deleted


def test_the_embedded_copy_comes_first_and_the_cache_is_not_read_for_it(folders):
    embedded = _put(folders["embedded"], PAYLOAD)
    cached = _put(folders["cache"], b"a damaged copy that no one needs to look at")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert locate(FILE) == embedded
    assert cached.exists()


def test_a_registered_graph_loads_from_the_embedded_folder_whatever_the_cache_holds(monkeypatch, tmp_path):
    monkeypatch.delenv(EMBEDDED_ENV, raising=False)  # the repository's data/ folder
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    (file,) = data.entry("cora").files
    cached = tmp_path / "cache" / file.relpath
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"\x80\x02 not the cora pickle")
    data.clear_caches()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            matrix = data.load("cora")
    finally:
        data.clear_caches()
    assert matrix.shape == data.entry("cora").shape and matrix.nnz == data.entry("cora").nnz
    assert cached.exists()  # not consulted: the embedded copy came first


UNVERIFIED = DataFile("x/g.txt", None, None, None)


def test_an_unverified_file_found_in_a_folder_is_used_but_not_pinned(folders, capfd):
    mirror_file = _put(folders["mirror"], PAYLOAD)
    assert locate(UNVERIFIED) == mirror_file
    assert "unverified" in capfd.readouterr().err
    assert not (folders["cache"] / "pins.json").exists()
    mirror_file.write_bytes(b"something else")  # without a pin there is nothing to hold it to
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert locate(UNVERIFIED) == mirror_file
    assert not (folders["cache"] / "pins.json").exists()


def test_a_pin_records_the_download_route(folders, monkeypatch):
    from sparsetir.data.cache import pin_sha256, pinned_sha256

    pins = pin_sha256("x/g.txt", DIGEST, "http://example.invalid/g.txt")
    record = json.loads(pins.read_text())["x/g.txt"]
    assert record["route"] == "download" and record["url"] == "http://example.invalid/g.txt" and record["pinned"]
    assert pinned_sha256("x/g.txt") == DIGEST
    mirror_file = _put(folders["mirror"], b"not the pinned file")
    with pytest.raises(ValueError, match=r"\(pinned .*left in place"):  # a pin is enforced on every route
        locate(UNVERIFIED)
    assert mirror_file.exists()
