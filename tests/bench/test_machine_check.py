"""The machine check before timing: what it reports, what it calls busy, and a strict run's refusal."""

from __future__ import annotations

import json

import pytest

from sparsetir.timing import DEFAULT, MachineBusyError, environment_info, machine, time_interleaved
from sparsetir.timing.__main__ import main as check_main


def state(other=0.0, steal=0.0, available=20 << 30, top=()):
    return {"host": "test", "cpu_count": 2, "interval_s": 0.5, "other_cpu_cores": other, "steal_cores": steal,
            "runnable_besides_this": 0.0, "top_processes": list(top), "load_average": [0.1, 0.1, 0.1],
            "memory": {"total_bytes": 24 << 30, "available_bytes": available}, "cpufreq": {"governors": None},
            "threads": {"usable_cpus": 2}}


BUSY = state(other=0.98, top=[{"pid": 4242, "command": "python busy_loop.py", "cores": 0.97}])


def test_a_quiet_machine_has_no_reasons():
    assert machine.busy_reasons(state()) == []


def test_a_busy_process_is_named_with_its_share_and_the_limit():
    (reason,) = machine.busy_reasons(BUSY)
    assert "0.98 cores" in reason and "pid 4242 python busy_loop.py (0.97)" in reason
    assert f"limit {DEFAULT.other_cpu_limit:g}" in reason


def test_steal_and_low_memory_are_busy_too():
    reasons = machine.busy_reasons(state(steal=0.5, available=1 << 30))
    assert any("stole 0.50 cores" in r for r in reasons) and any("1.0 GiB of 24.0 GiB" in r for r in reasons)


def test_a_strict_measurement_refuses_a_busy_machine_before_any_call(monkeypatch):
    monkeypatch.setattr(machine, "machine_state", lambda interval_s: BUSY)
    calls = []
    with pytest.raises(MachineBusyError, match="refusing to time on a busy machine.*pid 4242 python busy_loop.py"):
        time_interleaved({"a": lambda: calls.append(1)}, DEFAULT.replace(strict=True, samples=3, flush=False))
    assert calls == []


def test_a_strict_measurement_on_a_quiet_machine_times(monkeypatch):
    monkeypatch.setattr(machine, "machine_state", lambda interval_s: state())
    stats = time_interleaved({"a": lambda: None}, DEFAULT.replace(strict=True, samples=3, min_samples=3, flush=False))
    assert stats["a"].n >= 3


def test_the_command_line_prints_keeps_and_refuses(monkeypatch, tmp_path, capsys):
    import sparsetir.timing.__main__ as cli

    monkeypatch.setattr(cli, "machine_state", lambda interval_s: BUSY)
    path = tmp_path / "machine.json"
    assert check_main(["--json", str(path)]) == 0
    assert "busy: other processes used 0.98 cores" in capsys.readouterr().out
    assert check_main(["--json", str(path), "--strict"]) == 1
    kept = json.loads(path.read_text())
    assert kept["strict"] and "pid 4242" in kept["busy"][0]
    assert "refusing to time on a busy machine" in capsys.readouterr().err
    monkeypatch.setattr(cli, "machine_state", lambda interval_s: state())
    assert check_main(["--strict"]) == 0
    assert "quiet" in capsys.readouterr().out


def test_the_real_check_reports_every_field():
    found = machine.machine_state(0.1)
    for key in ("load_average", "other_cpu_cores", "steal_cores", "runnable_besides_this", "top_processes", "memory",
                "cpufreq", "threads"):
        assert key in found
    assert found["interval_s"] >= 0.1 and found["threads"]["usable_cpus"] >= 1
    assert "machine check" in machine.format_state(found, machine.busy_reasons(found))
    with pytest.raises(ValueError, match="interval_s must be positive"):
        machine.machine_state(0)


def test_every_record_provenance_carries_the_machine_snapshot():
    snapshot = environment_info()["machine"]
    assert set(snapshot) == {"load_average", "memory", "cpufreq", "threads"}
