"""A simulated CUDA device for the timer's GPU path: events read a clock that kernels advance."""


class FakeClock:
    """Simulated GPU time (ms): events read it, the kernel and the flush advance it."""

    def __init__(self):
        self.now_ms = 0.0
        self.zeroed = 0
        self.synchronized = 0


class FakeEvent:
    def __init__(self, clock):
        self.clock, self.at = clock, None

    def record(self):
        self.at = self.clock.now_ms

    def elapsed_time(self, end):
        return end.at - self.at


class FakeFlushBuffer:
    def __init__(self, clock, cost_ms):
        self.clock, self.cost_ms = clock, cost_ms

    def zero_(self):
        self.clock.zeroed += 1
        self.clock.now_ms += self.cost_ms


class FakeDevice:
    def __init__(self, clock, flush_ms):
        self.clock, self.flush_ms, self.flush_sizes = clock, flush_ms, []

    def event(self):
        return FakeEvent(self.clock)

    def synchronize(self):
        self.clock.synchronized += 1

    def flush_buffer(self, nbytes):
        self.flush_sizes.append(nbytes)
        return FakeFlushBuffer(self.clock, self.flush_ms)


def fake_kernel(clock, ms):
    """A kernel that takes ``ms`` of simulated GPU time; returns it and its call log."""
    calls = []

    def kernel():
        calls.append(1)
        clock.now_ms += ms

    return kernel, calls
