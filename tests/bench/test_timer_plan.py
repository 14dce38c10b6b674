"""The timer's plan on a simulated clock: probes, warm-up, the time cap, samples in seconds, the LLC size.

The CPU timer reads ``time.perf_counter_ns``; here that is a clock which only the kernel (2 ms a
call) and the flush (1 ms) advance, so every count and every sample is known exactly. The
interference sentinel is off (``sentinel=False``): it watches the real machine, and a round it
flagged would be repeated.
"""

from __future__ import annotations

import re
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from fake_cuda import FakeClock, FakeDevice, fake_kernel

from sparsetir.timing import Stats, TimingPolicy, sample_calls, time_cpu, time_cuda, time_interleaved, timer

KERNEL_NS = 2_000_000
FLUSH_NS = 1_000_000


class SimulatedClock:
    def __init__(self):
        self.ns = 10**12  # not 0: an elapsed time must not depend on when the clock started
        self.calls = 0

    def perf_counter_ns(self) -> int:
        return self.ns

    def kernel(self) -> None:
        self.calls += 1
        self.ns += KERNEL_NS


@pytest.fixture
def clock(monkeypatch) -> SimulatedClock:
    simulated = SimulatedClock()
    monkeypatch.setattr(timer, "time", SimpleNamespace(perf_counter_ns=simulated.perf_counter_ns))

    def flush(buffer):
        simulated.ns += FLUSH_NS

    monkeypatch.setattr(timer, "flush_cpu_cache", flush)
    return simulated


def test_the_probe_sets_the_warmup_and_the_time_cap_sets_the_samples(clock):
    """Probe: 2 ms a call, so a 21 ms warm-up is 11 calls; a round is 2 ms + a 1 ms flush, so 30.5 ms is 10."""
    stats = time_cpu(clock.kernel, samples=100, max_time_s=0.0305, min_samples=1, warmup_s=0.021, min_warmup=1,
                     flush_bytes=1 << 12, sentinel=False)
    assert stats.n == 10
    assert clock.calls == 1 + timer.PROBE_CALLS + 11 + 10
    assert stats.samples == pytest.approx([2e-3] * 10, rel=1e-12)
    assert stats.median == pytest.approx(2e-3, rel=1e-12)


def test_the_warmup_rounds_up_from_the_probe_measured_exactly(clock):
    """A warm-up a hair (0.1 ns) over ten 2 ms calls is eleven calls: the probe's total is the calls' time alone."""
    stats = time_cpu(clock.kernel, samples=1, max_time_s=None, min_samples=1, warmup_s=0.0200000001, min_warmup=1,
                     flush_bytes=1 << 12, sentinel=False)
    assert clock.calls == 1 + timer.PROBE_CALLS + 11 + stats.n


def test_without_a_flush_a_round_costs_only_the_calls(clock):
    stats = time_cpu(clock.kernel, flush=False, samples=100, max_time_s=0.0305, min_samples=1, warmup_s=0,
                     min_warmup=2, sentinel=False)
    assert stats.n == 15
    assert clock.calls == 1 + timer.PROBE_CALLS + 2 + 15


def test_the_time_cap_covers_every_callable_and_its_flush(clock):
    """Two callables: a round is 2 x (2 ms + 1 ms flush), so 30.5 ms holds 5 rounds."""
    stats = time_interleaved({"a": clock.kernel, "b": clock.kernel}, samples=100, max_time_s=0.0305, min_samples=1,
                             warmup_s=0, min_warmup=1, flush_bytes=1 << 12, sentinel=False)
    assert stats["a"].n == stats["b"].n == 5


def test_time_cpu_takes_the_policy_it_is_given(clock):
    stats = time_cpu(clock.kernel, TimingPolicy(samples=3, warmup_s=0, min_warmup=1, flush=False, sentinel=False))
    assert stats.n == 3


def test_interleaving_nothing_is_refused():
    with pytest.raises(ValueError, match="^time_interleaved needs at least one callable$"):
        time_interleaved({})


# ---------------------------------------------------------------- planning and statistics


def test_one_sample_is_allowed_and_none_is_refused():
    assert sample_calls(0.01, samples=1, max_time_s=None, min_samples=1) == 1
    with pytest.raises(ValueError, match="^samples must be >= 1, got 0$"):
        sample_calls(0.01, samples=0, max_time_s=None, min_samples=1)


def test_a_call_too_fast_to_measure_keeps_every_sample():
    assert sample_calls(0.0, samples=100, max_time_s=0.5, min_samples=10) == 100


def test_statistics_are_computed_in_float64():
    samples = np.array([0.1, 0.2, 0.7], dtype=np.float32)
    stats = Stats.from_samples(samples)
    as_float64 = samples.astype(np.float64)
    assert stats.p20 == np.quantile(as_float64, 0.2)
    assert stats.mean == as_float64.mean()


def test_no_samples_is_refused_by_name():
    with pytest.raises(ValueError, match="^Stats.from_samples needs a non-empty 1-D sequence of seconds$"):
        Stats.from_samples([])


# ---------------------------------------------------------------- the flush buffer and the LLC


@pytest.mark.parametrize(("text", "nbytes"), [
    ("1024K\n", 1 << 20),
    ("1024KB", 1 << 20),
    ("30720k", 30 << 20),
    ("8 MB", 8 << 20),
    ("2G", 2 << 30),
    ("512", 512),
])
def test_the_llc_size_is_parsed_from_sysfs(tmp_path, monkeypatch, text, nbytes):
    size_file = tmp_path / "size"
    size_file.write_text(text)
    monkeypatch.setattr(timer, "_LLC_SYSFS", size_file)
    assert timer.llc_bytes() == nbytes
    assert timer.default_flush_bytes() == 2 * nbytes


@pytest.mark.parametrize("text", ["abc", "12X", "K", ""])
def test_an_unreadable_llc_size_falls_back_to_the_default(tmp_path, monkeypatch, text):
    size_file = tmp_path / "size"
    size_file.write_text(text)
    monkeypatch.setattr(timer, "_LLC_SYSFS", size_file)
    assert timer.llc_bytes() == timer.DEFAULT_LLC_BYTES


def test_a_flush_buffer_has_a_positive_size():
    assert timer.cpu_flush_buffer(1).nbytes == 1
    with pytest.raises(ValueError, match="^flush buffer size must be positive, got 0$"):
        timer.cpu_flush_buffer(0)


# ---------------------------------------------------------------- the GPU path's device


def test_time_cuda_uses_the_process_device_when_none_is_given(monkeypatch):
    clock = FakeClock()
    kernel, _ = fake_kernel(clock, ms=1.0)
    device = FakeDevice(clock, flush_ms=0.5)
    monkeypatch.setattr(timer, "_torch_cuda_device", device)
    assert time_cuda(kernel, samples=10, min_samples=1).n == 10
    assert device.flush_sizes == [timer.CUDA_FLUSH_BYTES]


class FakeTorch:
    """Just what TorchCudaDevice asks of torch, on a host without a GPU."""

    __version__ = "0.0-fake"
    int8 = "int8"
    version = SimpleNamespace(cuda="12.0")

    def __init__(self, available: bool):
        self.allocated: list[tuple] = []
        self.cuda = SimpleNamespace(is_available=lambda: available, synchronize=lambda: self.allocated.append("sync"),
                                    Event=lambda **options: ("event", options))

    def empty(self, nbytes, *, dtype, device):
        self.allocated.append((nbytes, dtype, device))
        return object()


def test_the_torch_device_makes_timing_events_and_one_int8_buffer_per_size(monkeypatch):
    fake = FakeTorch(available=True)
    monkeypatch.setitem(sys.modules, "torch", fake)
    device = timer.TorchCudaDevice()
    assert device.event() == ("event", {"enable_timing": True})
    first = device.flush_buffer(256)
    assert device.flush_buffer(256) is first
    device.flush_buffer(512)
    device.synchronize()
    assert fake.allocated == [(256, "int8", "cuda"), (512, "int8", "cuda"), "sync"]


def test_the_torch_device_says_why_there_is_no_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", FakeTorch(available=False))
    message = re.escape("time_cuda needs a CUDA GPU, but torch.cuda.is_available() is False "
                        "(torch 0.0-fake, built with CUDA 12.0)")
    with pytest.raises(RuntimeError, match=f"^{message}$"):
        timer.TorchCudaDevice()
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(RuntimeError, match="^time_cuda needs a CUDA GPU through torch, and torch is not importable: "):
        timer.TorchCudaDevice()
