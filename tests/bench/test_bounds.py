"""The machine measurement and the three per-case models (DRAM bytes, gathered bytes, flops)."""

from __future__ import annotations

import math

import pytest

from sparsetir.bench.bounds import (
    Machine,
    case_bounds,
    measure_machine,
    measure_peak_rates,
    percent_of_bound,
    rate_percentages,
)
from sparsetir.timing import DEFAULT


def machine() -> Machine:
    return Machine(copy_1t=10e9, copy_all=20e9, threads=2,
                   gather={"l2": {64: 40e9}, "l3": {64: 20e9}, "dram": {64: 5e9}},
                   fma_flops=100e9, l2_bytes=1 << 20, l3_bytes=32 << 20)


def test_models_pick_the_cache_level_the_dense_operand_fits():
    small = case_bounds(machine(), op="spmm", shape=(1000, 1000), nnz=10_000, feat=64, min_bytes=10**6, flops=2 * 10**4 * 64)
    assert small["gather_level"] == "l2"  # 1000 x 64 floats = 256 KiB
    big = case_bounds(machine(), op="spmm", shape=(10**6, 10**6), nnz=10**7, feat=64, min_bytes=10**9, flops=1)
    assert big["gather_level"] == "dram"
    assert big["gather_s"] == pytest.approx((10**7 * 64 * 4 + 10**7 * 8 + (10**6 + 1) * 4 + 10**6 * 64 * 4) / 5e9)
    assert big["dram_s"] == pytest.approx(10**9 / 20e9)
    assert big["tight"] == "gather" and big["tight_s"] == big["gather_s"]
    assert percent_of_bound(big, big["tight_s"] * 2) == pytest.approx(50.0)
    assert percent_of_bound(big, None) is None


def test_machine_round_trips_and_bad_files_are_refused():
    m = machine()
    assert Machine.from_dict(m.to_dict()) == m
    broken = m.to_dict()
    broken["copy_all"] = -1
    with pytest.raises(ValueError, match="non-positive"):
        Machine.from_dict(broken)
    with pytest.raises(ValueError, match="not a measured machine"):
        Machine.from_dict({"copy_1t": 1})


@pytest.mark.slow
def test_measure_machine_gives_positive_rates():
    measured = measure_machine(DEFAULT.replace(samples=3, min_samples=2, max_time_s=0.2), feats=(32,))
    assert set(measured.gather) == {"l2", "l3", "dram"}
    rates = [measured.copy_1t, measured.copy_all, measured.fma_flops, *(r for g in measured.gather.values()
                                                                       for r in g.values())]
    assert all(math.isfinite(r) and r > 0 for r in rates)


def test_rate_percentages_put_a_record_against_the_fma_rate_and_the_memory_bound():
    record = {"stats": {"median": 0.01}, "flops": 4e8, "min_bytes": 5e7,
              "rates": {"fma_flops": 100e9, "copy_bytes_per_s": 20e9, "threads": 2}}
    fma, memory = rate_percentages(record)
    assert fma == pytest.approx(40.0)  # 4e8 flops in 10 ms = 40 Gflop/s of 100
    assert memory == pytest.approx(25.0)  # 5e7 bytes in 10 ms = 5 GB/s of 20
    assert rate_percentages({**record, "min_bytes": 0}) == (pytest.approx(40.0), None)  # a network: no bytes model
    assert rate_percentages({**record, "rates": None}) == (None, None)
    assert rate_percentages({**record, "stats": None}) == (None, None)


@pytest.mark.slow
def test_measure_peak_rates_gives_positive_rates():
    rates = measure_peak_rates(DEFAULT.replace(samples=3, min_samples=2, max_time_s=0.2))
    assert rates["fma_flops"] > 0 and rates["copy_bytes_per_s"] > 0 and rates["threads"] >= 1
