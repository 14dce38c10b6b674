"""The tuning database loses no record to a partial line and never returns a malformed one;
tuning runs leave no request folders behind, even when killed.

Issue 13, items 7 and 11 (part). A killed writer's unterminated line used to swallow the next
record, and a record with an empty ``config`` made every ``format="auto"`` call fail with
``KeyError: 'format'``.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparsetir.tune.database import TuningDatabase
from sparsetir.tune.measure import REQUEST_FOLDER_PREFIX, remove_stale_request_folders

KEY = {"op": "spmm", "feat": 8}


def _read_quietly(db: TuningDatabase) -> tuple[list[dict], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = db.records()
    return records, [str(w.message) for w in caught]


def test_a_record_after_a_partial_line_starts_on_a_fresh_line(tmp_path):
    db = TuningDatabase(tmp_path / "db.jsonl")
    db.add(KEY, {"format": "csr"}, median_s=2.0, source="tuned")
    with open(db.path, "a") as handle:
        handle.write('{"key_hash": "cut off by a kill')  # no newline: a writer killed mid-line
    db.add(KEY, {"format": "ell:4"}, median_s=1.0, source="tuned")
    records, said = _read_quietly(db)
    assert [r["config"] for r in records] == [{"format": "csr"}, {"format": "ell:4"}]
    assert len(said) == 1 and "line 2" in said[0]  # only the partial line is lost
    with pytest.warns(UserWarning, match="skipped 1 malformed"):
        assert db.lookup(KEY)["config"] == {"format": "ell:4"}


@pytest.mark.parametrize("config", [{}, {"unroll": 4}, {"format": ""}, {"format": None}, [], "csr", None])
def test_a_malformed_config_is_skipped_with_one_warning_and_never_returned(tmp_path, config):
    db = TuningDatabase(tmp_path / "db.jsonl")
    db.add(KEY, {"format": "csr"}, median_s=2.0, source="tuned")
    good = json.loads(db.path.read_text())
    with open(db.path, "a") as handle:  # a later record, written by a buggy or older writer
        handle.write(json.dumps({**good, "config": config}) + "\n")
    with pytest.warns(UserWarning, match="skipped 1 malformed tuning record") as caught:
        assert db.lookup(KEY)["config"] == {"format": "csr"}
    assert len(caught) == 1


def test_a_config_without_a_format_is_refused_when_written(tmp_path):
    db = TuningDatabase(tmp_path / "db.jsonl")
    with pytest.raises(ValueError, match="names no format"):
        db.add(KEY, {"unroll": 4}, median_s=1.0, source="tuned")
    assert not db.path.exists()


def test_a_database_that_cannot_be_written_warns_and_keeps_going(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    db = TuningDatabase(blocker / "db.jsonl")
    with pytest.warns(UserWarning, match="could not record the tuning result"):
        record = db.add(KEY, {"format": "csr"}, median_s=1.0, source="tuned")
    assert record["config"] == {"format": "csr"}


GOOD = st.fixed_dictionaries({"format": st.sampled_from(["csr", "ell:4", "hyb:1:1,2"]),
                              "unroll": st.integers(0, 8)})
JUNK = st.one_of(
    # text with no surrogates (category Cs: a lone one has no UTF-8 encoding, so it cannot be written as text) ...
    st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                   blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"), max_size=40)
    .map(lambda text: text.encode("utf-8")),
    # ... and raw bytes, which need not be UTF-8 at all (a damaged file)
    st.binary(max_size=40).map(lambda raw: raw.replace(b"\n", b" ").replace(b"\r", b" ")),
    st.sampled_from(['{"config": {}}', '{"key_hash": "x", "config": {}}', '{"key_hash": "x", "config": []}',
                     '{"key_hash": "x", "config": {"unroll": 1}}', "[1, 2]", "null", '"text"', "{"])
    .map(lambda text: text.encode("utf-8")),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(GOOD.map(lambda c: ("add", c)), JUNK.map(lambda j: ("junk", j)),
                                st.just(("cut", None))), min_size=1, max_size=12))
def test_lookup_returns_the_latest_good_record_whatever_else_the_file_holds(tmp_path_factory, steps):
    db = TuningDatabase(tmp_path_factory.mktemp("db") / "db.jsonl")
    added = []
    for kind, value in steps:
        if kind == "add":
            db.add(KEY, value, median_s=1.0, source="tuned")
            added.append(value)
        else:
            with open(db.path, "ab") as handle:
                handle.write(value + b"\n" if kind == "junk" else b'{"partial')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = db.records()
        found = db.lookup(KEY)
    assert [r["config"] for r in records] == added
    assert all(isinstance(r["config"], dict) and r["config"].get("format") for r in records)
    assert (found["config"] if found else None) == (added[-1] if added else None)


# Request folders of tuning runs

def _folder(root, pid: int, *, locked_by_us: bool = False):
    folder = root / f"{REQUEST_FOLDER_PREFIX}{pid}-abc123"
    folder.mkdir()
    (folder / "request.npz").write_bytes(b"x")
    lock = os.open(folder / "owner.lock", os.O_CREAT | os.O_RDWR)
    if locked_by_us:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return folder, lock
    os.close(lock)
    return folder, None


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_folders_of_ended_runs_are_removed_and_live_ones_kept(tmp_path):
    ended, _ = _folder(tmp_path, _dead_pid())
    live, lock = _folder(tmp_path, os.getpid(), locked_by_us=True)
    unlocked_but_young = tmp_path / f"{REQUEST_FOLDER_PREFIX}{os.getpid()}-nolock"
    unlocked_but_young.mkdir()  # created a moment ago by a live run, before it took its lock
    other = tmp_path / "sparsetir-cache-xyz"
    other.mkdir()
    try:
        assert remove_stale_request_folders(tmp_path) == [ended]
        assert live.exists() and unlocked_but_young.exists() and other.exists()
    finally:
        os.close(lock)
    assert remove_stale_request_folders(tmp_path) == [live]  # its lock is free now


KILLED_RUN = textwrap.dedent("""
    import sys, time
    import numpy as np, scipy.sparse as sp
    from sparsetir.tune.measure import Measurer
    A = sp.random(20, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
    measurer = Measurer("spmm", A, 4, "float32", {"kind": "llvm"}, workers=1)
    print(measurer._request.parent, flush=True)
    time.sleep(600)
""")


@pytest.mark.slow
def test_a_killed_tuning_run_leaves_a_folder_that_the_next_run_removes(tmp_path, monkeypatch):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-c", KILLED_RUN], env=env, stdout=subprocess.PIPE, text=True)
    try:
        folder = process.stdout.readline().strip()
        assert folder.startswith(str(tmp_path / REQUEST_FOLDER_PREFIX)), folder
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert os.path.isdir(folder)  # SIGKILL: nothing could clean up
    import numpy as np
    import scipy.sparse as sp

    from sparsetir.tune.measure import Measurer

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    A = sp.random(20, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
    measurer = Measurer("spmm", A, 4, "float32", {"kind": "llvm"}, workers=1)  # the next tuning run
    assert not os.path.exists(folder)
    mine = measurer._request.parent
    assert mine.exists()
    measurer.close()
    assert not mine.exists()
    deadline = time.monotonic() + 120  # only a hang catcher: removal takes well under a second when idle
    while list(tmp_path.glob(REQUEST_FOLDER_PREFIX + "*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(tmp_path.glob(REQUEST_FOLDER_PREFIX + "*"))
