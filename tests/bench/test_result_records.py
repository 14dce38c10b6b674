"""Result records: schema, provenance, atomic writes; one record per contender of a case."""

from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir import timing
from sparsetir.bench import case_runner, engine, records
from sparsetir.ops import get_op
from sparsetir.reference import get_reference
from sparsetir.timing import Stats, TimingPolicy

STATS = Stats.from_samples([0.003, 0.001, 0.002, 0.004]).to_dict()


def _record(**changes):
    fields = dict(experiment="spmm", op="spmm", device="cpu", dataset="cora", feat=32, contender="scipy",
                  status="ok", stats=STATS, provenance={"versions": {}}, times={"convert_s": 0.1},
                  min_bytes=1000, flops=2000, copy_bytes_per_s=1e10)
    fields.update(changes)
    return records.make_record(**fields)


def test_a_record_carries_stats_times_and_provenance():
    record = _record()
    assert record["schema"] == records.SCHEMA
    assert set(record["stats"]) >= {"median", "p20", "p80", "mean", "n", "samples"}
    assert record["times"] == {"convert_s": 0.1, "compile_s": None, "tune_s": None, "setup_s": None}
    assert json.loads(json.dumps(record)) == record


@pytest.mark.parametrize("mutate,message", [
    (lambda r: r.pop("dataset"), "lacks 'dataset'"),
    (lambda r: r.update(status="great"), "status must be one of"),
    (lambda r: r.update(stats=None), "an ok record needs stats"),
    (lambda r: r["stats"].update(p20=1.0), "p20 <= median <= p80"),
    (lambda r: r["stats"].update(n=7), "stats.n is 7"),
    (lambda r: r["stats"].update(mean=float("nan")), "stats.mean must be a finite"),
    (lambda r: r.update(status="failed", reason=None, stats=None), "needs a reason"),
    (lambda r: r.update(status="unavailable", reason="x"), "must not carry stats"),
    (lambda r: r["times"].pop("tune_s"), "times lack 'tune_s'"),
    (lambda r: r["times"].update(compile_s=-1.0), "times.compile_s must be"),
    (lambda r: r.update(feat=True), "'feat' must be int"),
    (lambda r: r.update(schema="other/9"), "this harness reads"),
])
def test_bad_records_are_refused_by_name(mutate, message):
    record = copy.deepcopy(_record())
    mutate(record)
    with pytest.raises(ValueError, match=message):
        records.validate_record(record)


def test_atomic_write_leaves_only_the_file(tmp_path):
    path = tmp_path / "deep" / "r.json"
    records.write_json_atomic(path, [_record()])
    records.write_json_atomic(path, [_record(), _record(contender="torch-csr-i32")])
    assert os.listdir(path.parent) == ["r.json"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not the temporary file's 0600
    assert [r["contender"] for r in records.read_records([path])] == ["scipy", "torch-csr-i32"]


def test_atomic_write_refuses_nan_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "r.json"
    records.write_json_atomic(path, {"a": 1})
    with pytest.raises(ValueError):
        records.write_json_atomic(path, {"a": float("nan")})
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["r.json"]


def test_read_records_names_the_bad_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"schema": records.SCHEMA}]))
    with pytest.raises(ValueError, match=r"bad\.json: record lacks"):
        records.read_records([path])


def test_gpu_clocks_from_nvidia_smi():
    class Done:
        stdout = "NVIDIA H200, 1980 MHz, 3201 MHz, 35, 120.5 W, 580.65\n"

    calls = []

    def fake_run(argv, **kwargs):
        calls.append(argv)
        return Done()

    clocks = records.gpu_clocks("/usr/bin/nvidia-smi", run=fake_run)
    assert clocks == [{"name": "NVIDIA H200", "clocks.sm": "1980 MHz", "clocks.mem": "3201 MHz",
                       "temperature.gpu": "35", "power.draw": "120.5 W", "driver_version": "580.65"}]
    assert "--query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,driver_version" in calls[0]


def test_gpu_clocks_without_nvidia_smi(monkeypatch):
    monkeypatch.setattr(records.shutil, "which", lambda name: None)
    assert records.gpu_clocks() is None


def test_provenance_names_versions_device_and_flush():
    info = records.provenance(device="cpu", flush=True, extra={"copy_bandwidth": 1})
    assert info["versions"]["numpy"] and info["device"] == "cpu" and info["flush"] is True
    assert info["timestamp"] and info["copy_bandwidth"] == 1
    assert "gpu_clocks" not in info


# the sentinel off: its repeats on a busy machine would change the sample count read below
FAST = TimingPolicy(flush=False, samples=3, max_time_s=0.2, warmup_s=0.0, min_warmup=1, min_samples=3, sentinel=False)


def test_run_case_gives_one_record_per_contender_and_a_reason_for_each_failure():
    A = sp.random(60, 50, density=0.1, format="csr", dtype=np.float32, random_state=0)
    bandwidth = {"bytes": 1, "bytes_per_s": 1e10, "method": "test"}
    out = case_runner.run_case(
        experiment="spmm", op="spmm", dataset="tiny", matrix=A, feat=4, timing=FAST, bandwidth=bandwidth,
        kernel_factory=get_op("spmm").benchmark_kernel,
        sparsetir_formats={"sparsetir-csr": "csr", "sparsetir-bad": "no-such-format"},
        baseline_names=["scipy_sparse", "cupy_sparse"],
    )
    by_name = {r["contender"]: r for r in out}
    assert set(by_name) == {"sparsetir-csr", "sparsetir-bad", "scipy", "cupy-cusparse"}
    assert by_name["sparsetir-csr"]["status"] == "ok" and by_name["sparsetir-csr"]["times"]["compile_s"] is not None
    assert by_name["sparsetir-csr"]["variant"] == "csr"
    assert by_name["scipy"]["status"] == "ok" and by_name["scipy"]["stats"]["n"] == 3
    for name in ("sparsetir-bad", "cupy-cusparse"):
        assert by_name[name]["status"] == "unavailable" and by_name[name]["reason"].startswith("unavailable: ")
    assert all(r["min_bytes"] == A.nnz * 8 + 61 * 4 + 50 * 4 * 4 + 60 * 4 * 4 for r in out)
    assert all(r["flops"] == 2 * A.nnz * 4 for r in out)


def test_an_unknown_baseline_library_is_refused_before_anything_runs():
    A = sp.random(6, 5, density=0.3, format="csr", dtype=np.float32, random_state=0)
    with pytest.raises(ValueError, match="unknown spmm baseline 'no_such_library'"):
        case_runner.run_case(experiment="spmm", op="spmm", dataset="tiny", matrix=A, feat=4, timing=FAST,
                             bandwidth={"bytes": 1, "bytes_per_s": 1e10, "method": "test"}, sparsetir_formats={},
                             baseline_names=["no_such_library"])


def test_status_of_a_wrong_or_failing_contender():
    assert case_runner.status_of(engine.Row("x", "conversion", error="wrong result: at (0, 0)")) == (
        "wrong", "wrong result: at (0, 0)")
    assert case_runner.status_of(engine.Row("x", "conversion", error="failed when called: boom"))[0] == "failed"


def test_unavailable_dataset_gives_one_star_record_per_feat():
    out = case_runner.unavailable_records(experiment="sddmm", op="sddmm", dataset="reddit", feats=[32, 64],
                                          reason="no route")
    assert [(r["contender"], r["feat"], r["status"]) for r in out] == [("*", 32, "unavailable"), ("*", 64, "unavailable")]
    assert out[0]["reason"] == "unavailable: no route"


def test_gpu_timing_path_uses_the_cuda_timer(monkeypatch):
    """time_rows on a GPU times each row with time_cuda (here over a simulated device)."""
    from fake_cuda import FakeClock, FakeDevice, fake_kernel

    clock = FakeClock()
    kernel, _calls = fake_kernel(clock, ms=2.0)
    monkeypatch.setattr(engine, "time_cuda",
                        lambda fn, policy, **kw: timing.time_cuda(fn, policy, device=FakeDevice(clock, 0.1), **kw))
    A = sp.random(10, 10, density=0.3, format="csr", dtype=np.float32, random_state=0)
    case = get_reference("spmm").make_case(A, 4, np.random.default_rng(0))
    row = engine.Row("torch-csr-i32", "conversion", run=kernel)
    engine.time_rows("spmm", [row], case, 1e12, TimingPolicy(samples=100), device="cuda")
    assert row.stats.n == 100 and row.stats.median == pytest.approx(2e-3)
    assert clock.zeroed >= 100  # the L2 flush before every sample
