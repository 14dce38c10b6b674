"""The interference sentinel: a round is flagged when other processes used the CPU, the hypervisor
stole it or the calibration probe ran slow; a flagged round is dropped for every contender and
repeated, up to the policy's bound, and past it the measurement is marked contaminated.

The machine is scripted here: ``cpu_snapshot`` returns counters in which other processes use
the CPU exactly during the blocks a test names, and the probe returns the times a test gives, so
every count is known. ``test_interference_neighbour.py`` does it with a real busy loop.
"""

from __future__ import annotations

import math
import time

import pytest

from sparsetir.timing import DEFAULT, TimingPolicy, interference, merge_reports, time_interleaved
from sparsetir.timing.interference import CpuSnapshot, cpu_shares, read_proc_stat

BLOCK_WALL_S = 0.5  # each scripted snapshot is this much later than the one before (> WINDOW_S)


class ScriptedMachine:
    """``cpu_snapshot`` and the probe, scripted: snapshot ``k`` (0: the sentinel's start) ends block ``k``."""

    def __init__(self, busy_blocks=(), steal_blocks=(), slow_probes=(), probe=(1e-4, 1e-5)):
        self.busy_blocks, self.steal_blocks, self.slow_probes = set(busy_blocks), set(steal_blocks), set(slow_probes)
        self.snapshots = 0
        self.probes = 0
        self.probe_times = probe
        self.wall = self.busy = self.steal = self.own = 0.0

    def snapshot(self) -> CpuSnapshot:
        block = self.snapshots
        self.snapshots += 1
        if block:
            self.wall += BLOCK_WALL_S
            self.own += 2 * BLOCK_WALL_S  # this process: two cores' worth
            self.busy += 2 * BLOCK_WALL_S + (BLOCK_WALL_S if block in self.busy_blocks else 0.0)
            self.steal += 0.5 * BLOCK_WALL_S if block in self.steal_blocks else 0.0
        return CpuSnapshot(self.wall, self.busy, self.steal, self.own)

    def probe(self) -> tuple[float, float]:
        index = self.probes
        self.probes += 1
        memory, compute = self.probe_times
        return (3 * memory, compute) if index in self.slow_probes else (memory, compute)


@pytest.fixture
def machine(monkeypatch):
    def install(**script):
        scripted = ScriptedMachine(**script)
        monkeypatch.setattr(interference, "cpu_snapshot", scripted.snapshot)

        class Probe:
            def __call__(self):
                return scripted.probe()

        monkeypatch.setattr(interference, "CalibrationProbe", Probe)
        return scripted

    return install


def counting(log: list | None = None, name: str = "fn"):
    """A callable of about a millisecond (so the sentinel judges every round on its own), logging its calls."""
    def call():
        if log is not None:
            log.append(name)
        time.sleep(0.001)

    return call


QUICK = DEFAULT.replace(flush=False, warmup_s=0.0, min_warmup=1, max_time_s=None, samples=6, min_samples=6)
FIRST_PROBES = 1 + interference.BASELINE_PROBES  # the probe's first touch, then its baseline


def test_a_quiet_machine_flags_nothing(machine):
    scripted = machine()
    log = []
    stats = time_interleaved({"a": counting(log, "a"), "b": counting(log, "b")}, QUICK)
    account = stats["a"].interference
    assert (account["rounds"], account["kept"], account["flagged"], account["repeated"]) == (6, 6, 0, 0)
    assert not account["contaminated"] and account["judged"]
    assert stats["a"].n == stats["b"].n == 6
    assert scripted.probes == FIRST_PROBES + 6, "one probe after every round (the rounds are slow enough)"
    assert account["trace"]["flagged"] == [False] * 6


def test_a_round_with_a_busy_neighbour_is_dropped_for_every_contender_and_repeated(machine):
    machine(busy_blocks={2, 3})
    log = []
    stats = time_interleaved({"a": counting(log, "a"), "b": counting(log, "b")}, QUICK)
    account = stats["b"].interference
    assert (account["rounds"], account["kept"], account["flagged"], account["repeated"]) == (8, 6, 2, 2)
    assert account["reasons"] == {"other_cpu": 2, "steal": 0, "probe": 0}
    assert not account["contaminated"]
    assert stats["a"].n == stats["b"].n == 6, "the contenders keep the same rounds"
    assert account["trace"]["flagged"] == [False, True, True, False, False, False, False, False]
    assert account["trace"]["other_cpu"][1] == pytest.approx(1.0 - 3 * interference._TICK_S / BLOCK_WALL_S)
    sampled = log[-16:]  # 8 rounds of two calls, after the cold calls, probes and warm-up
    assert sorted(sampled) == ["a"] * 8 + ["b"] * 8


def test_steal_and_a_slow_probe_flag_rounds_too(machine):
    # probe 0 is the first touch, 1..5 the baseline; the probe after round k is FIRST_PROBES + k - 1
    machine(steal_blocks={1}, slow_probes={FIRST_PROBES + 2, FIRST_PROBES + 3})  # round 3's probe and its rerun
    stats = time_interleaved({"a": counting()}, QUICK)
    account = stats["a"].interference
    assert account["reasons"] == {"other_cpu": 0, "steal": 1, "probe": 1}
    assert account["flagged"] == 2 and account["kept"] == 6


def test_a_probe_hiccup_that_its_rerun_does_not_repeat_flags_nothing(machine):
    machine(slow_probes={FIRST_PROBES + 2})
    account = time_interleaved({"a": counting()}, QUICK)["a"].interference
    assert account["flagged"] == 0


def test_past_the_repeat_bound_the_case_is_contaminated(machine):
    machine(busy_blocks=set(range(1, 100)))
    policy = QUICK.replace(max_repeat_fraction=0.5)
    stats = time_interleaved({"a": counting(), "b": counting()}, policy)
    account = stats["a"].interference
    bound = math.ceil(0.5 * 6)
    assert account["contaminated"] and account["flagged_kept"]
    assert (account["rounds"], account["kept"], account["flagged"], account["repeated"]) == (6 + bound, 0, 6 + bound,
                                                                                             bound)
    assert stats["a"].n == 6, "no clean rounds: the statistics use the earliest flagged rounds, and say so"


def test_a_mostly_clean_case_past_the_bound_keeps_only_its_clean_rounds(machine):
    machine(busy_blocks={1, 2, 3, 4})
    stats = time_interleaved({"a": counting()}, QUICK.replace(max_repeat_fraction=0.5))
    account = stats["a"].interference
    assert account["contaminated"] and not account["flagged_kept"]
    assert account["kept"] == stats["a"].n == 5


def test_a_zero_bound_flags_without_repeating(machine):
    machine(busy_blocks={1})
    account = time_interleaved({"a": counting()}, QUICK.replace(max_repeat_fraction=0.0))["a"].interference
    assert (account["rounds"], account["flagged"], account["repeated"], account["contaminated"]) == (6, 1, 0, True)


def test_without_the_sentinel_nothing_is_judged(machine):
    scripted = machine(busy_blocks={1, 2})
    account = time_interleaved({"a": counting()}, QUICK.replace(sentinel=False))["a"].interference
    assert not account["judged"] and account["flagged"] == 0 and account["kept"] == 6
    assert scripted.probes == 0


def test_cpu_shares_subtract_this_process_and_the_tick_slack():
    tick = interference._TICK_S
    start, end = CpuSnapshot(0.0, 10.0, 1.0, 5.0), CpuSnapshot(2.0, 14.0, 1.0, 8.0)
    other, steal = cpu_shares(start, end, slack_ticks=0)
    assert other == pytest.approx(0.5) and steal == 0.0
    assert cpu_shares(start, end, slack_ticks=10)[0] == pytest.approx((1.0 - 10 * tick) / 2.0)
    assert cpu_shares(start, CpuSnapshot(2.0, None, None, 8.0)) == (None, None)


def test_proc_stat_is_read_in_seconds_and_a_strange_file_is_none(tmp_path):
    path = tmp_path / "stat"
    path.write_text("cpu  100 20 30 4000 50 6 7 80 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    busy, steal = read_proc_stat(path)
    assert busy == pytest.approx((100 + 20 + 30 + 6 + 7) * interference._TICK_S)
    assert steal == pytest.approx(80 * interference._TICK_S)
    path.write_text("intr 1 2 3\n")
    assert read_proc_stat(path) is None
    assert read_proc_stat(tmp_path / "missing") is None


def test_the_real_probe_is_short_and_positive():
    probe = interference.CalibrationProbe()
    memory, compute = probe()
    assert 0 < memory < 0.05 and 0 < compute < 0.05


def test_reports_of_several_processes_add_up():
    one = interference.interference_report(rounds=5, kept=4, flagged=1, repeated=1, reasons={"other_cpu": 1})
    two = interference.interference_report(rounds=6, kept=3, flagged=3, repeated=1, contaminated=True)
    merged = merge_reports([one, two])
    assert (merged["rounds"], merged["kept"], merged["flagged"], merged["repeated"]) == (11, 7, 4, 2)
    assert merged["contaminated"] and merged["reasons"]["other_cpu"] == 1 and len(merged["processes"]) == 2


@pytest.mark.parametrize(("field", "value"), [("other_cpu_limit", -0.1), ("probe_limit", math.inf),
                                              ("max_repeat_fraction", "1"), ("processes", 0), ("sentinel", 1),
                                              ("strict", "yes")])
def test_bad_sentinel_settings_are_refused_by_name(field, value):
    with pytest.raises((TypeError, ValueError), match=field):
        TimingPolicy(**{field: value})


def test_a_process_share_splits_the_samples_the_minimum_and_the_time_cap():
    policy = TimingPolicy(samples=20, min_samples=10, max_time_s=3.0, processes=3, seed=7)
    shares = [policy.for_process(i) for i in range(3)]
    assert [s.samples for s in shares] == [7, 7, 6] and sum(s.min_samples for s in shares) == 10
    assert all(s.max_time_s == pytest.approx(1.0) and s.processes == 1 for s in shares)
    assert [s.seed for s in shares] == [7, 8, 9]
    with pytest.raises(ValueError, match="process index"):
        policy.for_process(3)
