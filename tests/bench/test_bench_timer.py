"""The one timer: statistics, cache flush, warm-up and sampling plans, interleaving, CUDA logic."""

import dataclasses

import pytest
from fake_cuda import FakeClock, FakeDevice, fake_kernel

from sparsetir.timing import (
    DEFAULT,
    TUNING,
    Stats,
    TimingPolicy,
    environment,
    sample_calls,
    time_cpu,
    time_cuda,
    time_interleaved,
    timer,
    warmup_calls,
)


def test_stats_summarise_known_samples():
    stats = Stats.from_samples([5.0, 1.0, 4.0, 2.0, 3.0])
    assert stats.median == 3.0
    assert stats.p20 == pytest.approx(1.8)
    assert stats.p80 == pytest.approx(4.2)
    assert stats.mean == 3.0
    assert stats.min == 1.0
    assert stats.n == 5
    assert stats.samples == [5.0, 1.0, 4.0, 2.0, 3.0]
    assert Stats(**stats.to_dict()) == stats


def test_stats_refuse_no_samples():
    with pytest.raises(ValueError, match="non-empty"):
        Stats.from_samples([])


def test_warmup_lasts_at_least_the_time_and_the_count():
    assert warmup_calls(0.001, warmup_s=0.025, min_warmup=10) == 25
    assert warmup_calls(0.01, warmup_s=0.025, min_warmup=10) == 10
    assert warmup_calls(0.0, warmup_s=0.025, min_warmup=10) == 10


def test_time_cap_reduces_samples_but_keeps_a_minimum():
    assert sample_calls(0.01, samples=100, max_time_s=None, min_samples=10) == 100
    assert sample_calls(0.01, samples=100, max_time_s=0.5, min_samples=10) == 50
    assert sample_calls(0.01, samples=100, max_time_s=0.01, min_samples=10) == 10
    assert sample_calls(0.01, samples=5, max_time_s=0.01, min_samples=10) == 5


def test_llc_size_is_read_from_sysfs(tmp_path, monkeypatch):
    size_file = tmp_path / "size"
    size_file.write_text("32768K\n")
    monkeypatch.setattr(timer, "_LLC_SYSFS", size_file)
    assert timer.llc_bytes() == 32 << 20
    monkeypatch.setattr(timer, "_LLC_SYSFS", tmp_path / "missing")
    assert timer.llc_bytes() == timer.DEFAULT_LLC_BYTES


def test_flush_buffer_is_allocated_once_and_larger_than_the_llc():
    buffer = timer.cpu_flush_buffer()
    assert buffer.nbytes > timer.llc_bytes()
    allocated = dict(timer._cpu_flush_buffers)
    time_cpu(lambda: None, samples=3, min_warmup=1, warmup_s=0)
    assert timer.cpu_flush_buffer() is buffer
    assert timer._cpu_flush_buffers == allocated


def test_flush_rewrites_every_byte():
    buffer = timer.cpu_flush_buffer(4096)
    before = buffer.copy()
    timer.flush_cpu_cache(buffer)
    assert ((buffer - before) == 1).all()


def test_time_cpu_returns_the_requested_samples():
    calls = []
    stats = time_cpu(lambda: calls.append(1), samples=17, min_warmup=3, warmup_s=0, flush_bytes=1 << 16,
                     sentinel=False)  # a round flagged on a busy machine would be repeated
    assert stats.n == len(stats.samples) == 17
    assert all(sample > 0 for sample in stats.samples)
    assert len(calls) == 1 + timer.PROBE_CALLS + 3 + 17


def test_time_cpu_without_flush_still_samples():
    stats = time_cpu(lambda: sum(range(100)), flush=False, samples=5, min_warmup=1, warmup_s=0)
    assert stats.n == 5 and stats.min > 0


def test_time_cap_keeps_at_least_min_samples():
    import time

    stats = time_cpu(lambda: time.sleep(0.002), samples=100, max_time_s=0.02, min_samples=4,
                     min_warmup=1, warmup_s=0, flush=False)
    assert 4 <= stats.n < 100


def test_interleaving_calls_every_callable_equally_in_seeded_random_order():
    log = []

    def runs(name):
        return lambda: log.append(name)

    def sampled_orders(seed):
        log.clear()
        time_interleaved({name: runs(name) for name in "abc"}, samples=20, min_warmup=2, warmup_s=0,
                         flush_bytes=1 << 16, seed=seed, sentinel=False)
        sampled = log[-60:]
        return [tuple(sampled[i:i + 3]) for i in range(0, 60, 3)]

    orders = sampled_orders(seed=1)
    assert all(sorted(order) == ["a", "b", "c"] for order in orders)
    assert len(set(orders)) > 1
    assert sampled_orders(seed=1) == orders
    assert log.count("a") == log.count("b") == log.count("c")


def test_cuda_timer_plans_warmup_and_samples_from_the_probe():
    clock = FakeClock()
    kernel, calls = fake_kernel(clock, ms=1.0)
    device = FakeDevice(clock, flush_ms=0.5)
    stats = time_cuda(kernel, device=device)
    warmup = warmup_calls(0.0015, 0.025, 10)  # the probe sees 1 ms kernel + 0.5 ms flush
    assert warmup == 17
    assert len(calls) == 1 + timer.PROBE_CALLS + warmup + 100
    assert clock.zeroed == timer.PROBE_CALLS + 100
    assert device.flush_sizes == [256 << 20]
    assert stats.n == 100
    assert stats.samples == pytest.approx([1e-3] * 100)  # the flush is outside the event pair


def test_cuda_timer_respects_the_time_cap():
    clock = FakeClock()
    kernel, _ = fake_kernel(clock, ms=1.0)
    stats = time_cuda(kernel, device=FakeDevice(clock, flush_ms=0.5), max_time_s=0.03)
    assert stats.n == 20


def test_cuda_timer_without_cuda_raises_a_clear_error(monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setattr(timer, "_torch_cuda_device", None)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        time_cuda(lambda: None)


def test_environment_info_records_provenance():
    info = environment.environment_info(flush=False)
    assert info["versions"]["numpy"] and info["versions"]["python"]
    assert "GOMP_SPINCOUNT" in info["env"] and "TVM_THREAD_POOL_SPIN_COUNT" in info["env"]
    assert info["flush"] is False and info["flush_bytes"] == 0
    assert info["cpu_count"] >= 1


def test_a_policy_is_frozen_checked_and_replaced_field_by_field():
    assert DEFAULT.samples == 100 and TUNING.samples == 15
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.samples = 3
    assert DEFAULT.replace(samples=3).samples == 3 and DEFAULT.samples == 100
    with pytest.raises(TypeError, match="unknown timing setting"):
        DEFAULT.replace(sampels=3)
    with pytest.raises(ValueError, match="samples"):
        TimingPolicy(samples=0)
    with pytest.raises(ValueError, match="max_time_s"):
        TimingPolicy(max_time_s=-1.0)
    assert TimingPolicy.from_mapping({"flush": False}).flush is False
    assert TimingPolicy.from_mapping(TUNING) is TUNING
