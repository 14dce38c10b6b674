"""A case timed in several fresh worker processes: each takes its share of the samples, the
records pool them and keep every process's medians; the interval holds what changes between
processes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sparsetir.bench.report.intervals import ratio_interval
from sparsetir.bench.workers import fork_workers, merge_records, run_in_workers, threads_running
from sparsetir.timing import DEFAULT, clear_worker_share, set_worker_share, share_of

HERE = Path(__file__).resolve().parent
TIMING = DEFAULT.replace(flush=False, samples=12, min_samples=6, warmup_s=0.0, min_warmup=1, processes=3).to_dict()


def test_a_case_runs_in_fresh_processes_each_with_its_share_and_the_records_pool_them(tmp_path):
    output = tmp_path / "records.json"
    records = run_in_workers("workers_target:main", {"timing": TIMING}, 3, output=output, search_path=[HERE])
    assert json.loads(output.read_text()) == records
    once, twice = records
    assert once["contender"] == "once" and once["provenance"]["worker_processes"] == 3
    for record in records:
        stats = record["stats"]
        assert [p["n"] for p in stats["processes"]] == [4, 4, 4]  # 12 samples split between 3 workers
        assert stats["n"] == 12 == len(stats["samples"])
        assert stats["median"] == pytest.approx(float(np.median(stats["samples"])))
        assert float(np.median(stats["samples"][:4])) == pytest.approx(stats["processes"][0]["median"])
        account = stats["interference"]
        assert len(account["processes"]) == 3 and account["rounds"] == sum(p["rounds"] for p in account["processes"])
    assert once["provenance"]["share"] == [0, 3]  # the first worker's provenance; each worker was its own process
    starts = {process["trace"]["t0_unix"] for process in once["stats"]["interference"]["processes"]}
    assert len(starts) == 3  # a sentinel of its own (baseline, warm-up) in each worker


def test_workers_are_fresh_processes(tmp_path):
    import os

    runs = []
    for index in range(2):
        path = tmp_path / f"{index}.json"
        run_in_workers("workers_target:main", {"timing": TIMING}, 1, output=path, search_path=[HERE])
        runs.append(json.loads(path.read_text())[0]["provenance"]["pid"])
    assert len(set(runs)) == 2 and os.getpid() not in runs


def test_workers_forked_from_a_warm_parent_are_fresh_children_with_their_shares(tmp_path):
    import os

    from workers_target import main

    output = tmp_path / "forked.json"
    records = fork_workers(main, {"timing": TIMING}, 3, output=output, known_threads=threads_running())
    assert json.loads(output.read_text()) == records
    once = records[0]
    assert once["provenance"]["worker_start"] == "forked" and once["provenance"]["share"] == [0, 3]
    assert once["provenance"]["pid"] != os.getpid() and [p["n"] for p in once["stats"]["processes"]] == [4, 4, 4]
    starts = {process["trace"]["t0_unix"] for process in once["stats"]["interference"]["processes"]}
    assert len(starts) == 3  # each child its own sentinel baseline and warm-up
    assert share_of(DEFAULT.replace(processes=3)).processes == 3  # the parent never took a worker's share
    with pytest.raises(RuntimeError, match="worker process 2 of 2 .* exited with status 1"):
        fork_workers(_fails_in_second_worker, {}, 2, output=tmp_path / "bad.json", known_threads=threads_running())
    assert not (tmp_path / "bad.json").exists()


def _fails_in_second_worker(*, output):
    from sparsetir.timing import worker_share

    if worker_share()[0] == 1:
        raise RuntimeError("on purpose")
    Path(output).write_text("[]")
    return []


def test_a_parent_running_another_thread_is_not_forked_but_spawns_fresh_workers(tmp_path, capfd):
    import threading

    from workers_target import main

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        known = threads_running() - 1
        with pytest.raises(RuntimeError, match="cannot fork worker processes: .* threads run"):
            fork_workers(main, {"timing": TIMING}, 2, output=tmp_path / "a.json", known_threads=known)
        records = fork_workers(main, {"timing": TIMING}, 2, output=tmp_path / "b.json", known_threads=known,
                               fallback="workers_target:main", search_path=[HERE])
    finally:
        stop.set()
        thread.join()
    assert records[0]["provenance"]["worker_start"] == "spawned"
    assert "started fresh, not forked" in capfd.readouterr().err


def test_a_record_that_failed_in_one_worker_is_failed_and_says_which(tmp_path):
    records = run_in_workers("workers_target:main", {"timing": TIMING, "fail_in_worker": 1}, 2,
                             output=tmp_path / "r.json", search_path=[HERE])
    once, twice = records
    assert once["status"] == "ok" and once["stats"]["n"] == 12  # 6 + 6: with 2 workers
    assert twice["status"] == "failed" and twice["stats"] is None
    assert twice["reason"] == "in worker process 2 of 2: failed: on purpose"


def test_workers_that_disagree_on_their_records_are_refused():
    record = {"experiment": "spmm", "dataset": "toy", "contender": "a", "status": "ok"}
    with pytest.raises(RuntimeError, match="worker 2 of 2 wrote other records"):
        merge_records([[record], [{**record, "contender": "b"}]])
    with pytest.raises(ValueError, match="worker count"):
        run_in_workers("workers_target:main", {}, 0, output="unused.json")


def test_inside_a_worker_only_policies_split_across_processes_take_a_share():
    split, whole = DEFAULT.replace(samples=10, min_samples=5, max_time_s=3.0, processes=3), DEFAULT
    assert share_of(split) is split  # not in a worker: the whole policy
    set_worker_share(2, 3)
    try:
        share = share_of(split)
        assert (share.samples, share.min_samples, share.max_time_s, share.seed, share.processes) == (3, 1, 1.0, 2, 1)
        assert share_of(whole) is whole  # e.g. the tuner's policy
    finally:
        clear_worker_share()
    with pytest.raises(ValueError, match="index"):
        set_worker_share(3, 3)


def test_the_interval_of_pooled_workers_holds_the_spread_between_them():
    rng = np.random.default_rng(0)
    # three processes whose ratio differs (1.0, 1.2, 1.4) far more than the rounds within each vary
    reference = np.concatenate([np.full(20, 1e-3) * rng.normal(1, 0.01, 20) for _ in range(3)])
    contender = np.concatenate([np.full(20, 1e-3 / r) * rng.normal(1, 0.01, 20) for r in (1.0, 1.2, 1.4)])
    flat = ratio_interval(reference, contender)
    grouped = ratio_interval(reference, contender, groups=[20, 20, 20])
    assert grouped.low <= flat.low and grouped.high >= flat.high
    assert grouped.high - grouped.low > 2 * (flat.high - flat.low)
    assert grouped.low < 1.1 and grouped.high > 1.3  # a rerun's ratio anywhere in 1.0-1.4 is inside


def test_table_samples_carry_their_processes_so_table_intervals_draw_processes_then_rounds():
    from sparsetir.bench.report.intervals import rounds_of

    rng = np.random.default_rng(0)
    reference = np.concatenate([np.full(20, 1e-3) * rng.normal(1, 0.01, 20) for _ in range(3)])
    contender = np.concatenate([np.full(20, 1e-3 / r) * rng.normal(1, 0.01, 20) for r in (1.0, 1.2, 1.4)])
    processes = [{"n": 20}] * 3
    ref, con = (rounds_of({"samples": list(x), "processes": processes}) for x in (reference, contender))
    assert ref.groups == [20, 20, 20] and rounds_of({"samples": [1.0, 2.0]}).groups == []
    assert ratio_interval(ref, con) == ratio_interval(reference, contender, groups=[20, 20, 20])
    assert ratio_interval(ref, list(con)) == ratio_interval(reference, contender)  # one side from one process


def _looped_replicates(reference, contender, groups, rng, count):
    """The grouped bootstrap one replicate at a time (processes with replacement, then rounds within each)."""
    starts, out = np.cumsum([0, *groups[:-1]]), np.empty(count)
    for replicate in range(count):
        drawn = rng.integers(0, len(groups), size=len(groups))
        index = np.concatenate([starts[g] + rng.integers(0, groups[g], size=groups[g]) for g in drawn])
        out[replicate] = np.median(reference[index]) / np.median(contender[index])
    return out


@pytest.mark.parametrize("groups", [[20, 20, 20], [5, 30, 12], [1, 9]])
def test_the_grouped_bootstrap_draws_as_the_one_replicate_at_a_time_definition(groups):
    from sparsetir.bench.report.intervals import _resampled_ratios

    rng = np.random.default_rng(1)
    ratios = np.repeat([1.0, 1.25, 1.6][:len(groups)], groups)
    reference = 1e-3 * rng.normal(1, 0.05, sum(groups))
    contender = reference / ratios * rng.normal(1, 0.05, sum(groups))
    fast = _resampled_ratios(reference, contender, np.random.default_rng(2), 4000, groups)
    slow = _looped_replicates(reference, contender, groups, np.random.default_rng(3), 4000)
    assert fast.shape == (4000,) and np.isfinite(fast).all()
    assert fast.min() >= slow.min() * 0.9 and fast.max() <= slow.max() * 1.1  # no replicate outside what can be drawn
    for q in (5, 25, 50, 75, 95):  # the same distribution: quantiles agree within the bootstrap's own noise
        assert np.percentile(fast, q) == pytest.approx(np.percentile(slow, q), rel=0.03)
