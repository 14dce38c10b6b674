"""Data files are verified by SHA-256, and each file is hashed once per process while it is unchanged."""

from __future__ import annotations

import hashlib
import os
import re
from types import SimpleNamespace

import pytest

from sparsetir.data import checksum
from sparsetir.data.checksum import file_sha256, verify_sha256


@pytest.fixture
def hashes(monkeypatch) -> list:
    """Every sha256 object the module makes (one per file actually read)."""
    made = []

    def sha256():
        digest = hashlib.sha256()
        made.append(digest)
        return digest

    monkeypatch.setattr(checksum, "hashlib", SimpleNamespace(sha256=sha256))
    return made


def test_the_digest_of_a_file_of_several_chunks(tmp_path):
    path = tmp_path / "big.bin"
    payload = os.urandom(checksum._CHUNK * 2 + 123)
    path.write_bytes(payload)
    assert file_sha256(path) == hashlib.sha256(payload).hexdigest()
    assert file_sha256(tmp_path / "big.bin") == file_sha256(str(path))


def test_an_unchanged_file_is_hashed_once(tmp_path, hashes):
    path = tmp_path / "graph.txt"
    path.write_bytes(b"0 1\n1 2\n")
    first = file_sha256(path)
    assert file_sha256(path) == first and len(hashes) == 1
    path.write_bytes(b"0 1\n1 2\n2 3\n")  # another size: hashed again
    assert file_sha256(path) == hashlib.sha256(b"0 1\n1 2\n2 3\n").hexdigest() and len(hashes) == 2


def test_a_matching_digest_passes_in_either_case(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_bytes(b"payload")
    digest = hashlib.sha256(b"payload").hexdigest()
    verify_sha256(path, digest)
    verify_sha256(path, digest.upper())


def test_a_mismatch_names_the_file_and_both_digests(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_bytes(b"payload")
    actual = hashlib.sha256(b"payload").hexdigest()
    wrong = "AB" * 32
    message = (f"checksum mismatch for {path}: expected sha256 {wrong.lower()}, got {actual}; "
               "the file is corrupt, truncated or a different version")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        verify_sha256(path, wrong)
