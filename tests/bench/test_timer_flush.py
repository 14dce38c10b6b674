"""Every CPU sample starts from a flushed cache: the timer's flushes are counted, call by call.

``flush_cpu_cache`` is wrapped to log each flush (and the buffer it rewrote) into the same log
as the timed callables, so the tests see exactly where the flushes fall. The interference
sentinel is off here (``sentinel=False``): a round it flags on a busy machine would be repeated,
adding flushes these counts do not expect (its own tests are in test_interference.py).
"""

from __future__ import annotations

import pytest

from sparsetir.timing import TUNING, time_cpu, time_interleaved, timer

FLUSH_BYTES = 1 << 16


@pytest.fixture
def log(monkeypatch) -> list:
    """("flush", nbytes) for every flush, the callable's name for every call."""
    events: list = []
    flush = timer.flush_cpu_cache

    def logged_flush(buffer):
        events.append(("flush", buffer.nbytes))
        flush(buffer)

    monkeypatch.setattr(timer, "flush_cpu_cache", logged_flush)
    return events


def calls(log: list, name: str):
    return lambda: log.append(name)


def flushes(log: list) -> int:
    return sum(1 for event in log if isinstance(event, tuple))


def test_the_flush_runs_once_per_timed_sample_plus_its_own_probe(log):
    stats = time_cpu(calls(log, "fn"), samples=7, min_warmup=3, warmup_s=0, flush_bytes=FLUSH_BYTES, sentinel=False)
    assert stats.n == 7
    # one probe of the flush itself, then one before each sample (the call probe is not flushed)
    assert flushes(log) == 1 + 7
    assert set(event for event in log if isinstance(event, tuple)) == {("flush", FLUSH_BYTES)}


def test_every_timed_call_comes_right_after_a_flush(log):
    time_cpu(calls(log, "fn"), samples=6, min_warmup=4, warmup_s=0, flush_bytes=FLUSH_BYTES, sentinel=False)
    probes_end = 2 + timer.PROBE_CALLS
    cold, probes, warmup, sampled = log[0:2], log[2:probes_end], log[probes_end:probes_end + 4], log[probes_end + 4:]
    assert cold == [("flush", FLUSH_BYTES), "fn"], "the flush is probed once, then the cold call"
    assert probes == ["fn"] * timer.PROBE_CALLS, "the call probe is not flushed (the flush was timed on its own)"
    assert warmup == ["fn"] * 4, "the warm-up is not flushed"
    assert sampled == [("flush", FLUSH_BYTES), "fn"] * 6


def test_interleaved_timing_flushes_before_each_callable_of_each_round(log):
    time_interleaved({name: calls(log, name) for name in "abc"}, samples=5, min_warmup=1, warmup_s=0,
                     flush_bytes=FLUSH_BYTES, sentinel=False)
    assert flushes(log) == 1 + 3 * 5
    sampled = log[-30:]
    assert sampled[0::2] == [("flush", FLUSH_BYTES)] * 15
    assert sorted(sampled[1::2]) == ["a"] * 5 + ["b"] * 5 + ["c"] * 5


def test_the_tuning_policy_flushes(log):
    assert TUNING.flush
    time_cpu(calls(log, "fn"), TUNING, samples=5, min_samples=5, min_warmup=1, warmup_s=0, flush_bytes=FLUSH_BYTES,
             sentinel=False)
    assert flushes(log) == 1 + 5


def test_flush_false_never_flushes(log):
    stats = time_cpu(calls(log, "fn"), flush=False, samples=5, min_warmup=2, warmup_s=0, sentinel=False)
    assert stats.n == 5
    assert flushes(log) == 0
    assert log == ["fn"] * (1 + timer.PROBE_CALLS + 2 + 5)
