"""The R-GCN benchmark: every contender is checked before timing, records carry every column, and
datasets or contenders that cannot run give records saying why."""

import numpy as np
import pytest

from sparsetir.bench.__main__ import parse_args
from sparsetir.bench.families import rgcn as bench
from sparsetir.bench.family import Contender
from sparsetir.bench.memory import MEMORY_METHODS, measure_memory
from sparsetir.bench.records import validate_record
from sparsetir.data.random_relational import check_relational_name, parse_relational_spec
from sparsetir.reference.rgcn import rgcn_inputs
from sparsetir.timing import TimingPolicy

# the sentinel off: its repeats on a busy machine would change the sample counts these tests read
TINY = TimingPolicy(flush=False, samples=3, min_samples=3, warmup_s=0.0, min_warmup=0, max_time_s=None,
                    sentinel=False)
GRAPH = "relational:120:3:600"
DIMS = (8, 8, 8)


def _wrong_contender(calls: list):
    """A contender whose output is the right shape but off by one everywhere; counts its calls."""
    def factory(inputs):
        import torch

        n, out = inputs.graph.shape[0], inputs.dims[-1]

        def run():
            calls.append(1)
            return torch.ones(n, out) * 1e3

        return run

    return Contender("wrong-model", factory)


@pytest.fixture(scope="module")
def records():
    """sparsetir, the torch relation loop, a wrong contender and Graphiler on a small random graph (no memory)."""
    calls = []
    contenders = [bench.FAMILY.sparsetir_contender(None),
                  *bench.FAMILY.baseline_contenders(["torch-relation-loop", "graphiler"]), _wrong_contender(calls)]
    found = bench.benchmark_dataset(GRAPH, contenders, dims=DIMS, timing=TINY, memory=False, threads=2)
    return {record["contender"]: record for record in found}, calls


def test_every_record_validates_and_has_the_columns(records):
    found, _ = records
    assert set(found) == {"sparsetir", "torch-relation-loop", "graphiler", "wrong-model"}
    for record in found.values():
        validate_record(record)
        assert record["experiment"] == "rgcn" and record["dataset"] == GRAPH and record["feat"] == DIMS[0]
        assert set(record["times"]) == {"convert_s", "compile_s", "tune_s", "setup_s"}
        assert record["rgcn"]["dims"] == list(DIMS) and record["rgcn"]["num_relations"] == 3
        assert "memory" in record and record["flops"] > 0 and record["min_bytes"] > 0


def test_sparsetir_is_timed_with_its_conversion_and_compile_times(records):
    found, _ = records
    ours = found["sparsetir"]
    assert ours["status"] == "ok" and ours["stats"]["n"] == 3 and ours["stats"]["median"] > 0
    assert ours["times"]["convert_s"] > 0 and ours["times"]["compile_s"] >= 0 and ours["times"]["tune_s"] is None
    assert ours["variant"] and "dataflow=" in ours["variant"]
    assert ours["rgcn"]["kind"] == "sparsetir" and ours["rgcn"]["speedup_vs_best"] > 0
    baseline = found["torch-relation-loop"]
    assert baseline["status"] == "ok" and baseline["times"]["compile_s"] is None
    assert baseline["rgcn"]["speedup_vs_best"] == pytest.approx(1.0)


def test_a_wrong_contender_is_refused_before_timing(records):
    found, calls = records
    wrong = found["wrong-model"]
    assert wrong["status"] == "wrong" and wrong["reason"].startswith("wrong result")
    assert wrong["stats"] is None and len(calls) == 1  # the check's one call; never timed


def test_graphiler_is_a_row_that_says_why(records):
    found, _ = records
    assert found["graphiler"]["status"] == "unavailable" and "Graphiler" in found["graphiler"]["reason"]


def test_a_dataset_no_route_provides_is_one_unavailable_row(isolated_data):
    found = bench.benchmark_dataset("bgs", [], dims=DIMS, timing=TINY, memory=False)
    assert len(found) == 1
    record = validate_record(found[0])
    assert record["contender"] == "*" and record["status"] == "unavailable" and "bgs" in record["reason"]


def test_a_contender_that_fails_to_build_gets_a_failed_row():
    def broken(inputs):
        raise RuntimeError("no kernel for you")

    inputs = rgcn_inputs(bench.load_graph(GRAPH), DIMS)
    (row,) = bench.FAMILY.check([Contender("broken", broken)], inputs, bench.FAMILY.reference(inputs))
    assert row.run is None and row.error.startswith("failed to build: RuntimeError: no kernel for you")


def test_peak_memory_is_measured_in_a_fresh_process_per_contender():
    contenders = bench.FAMILY.baseline_contenders(["torch-gather-bmm-scatter"]) + [Contender("local", lambda i: None)]
    memory = measure_memory("rgcn", contenders, {"dataset": "relational:2000:4:40000", "dims": DIMS, "seed": 0},
                            threads=1)
    assert "no memory probe" in memory["local"]["error"]
    measured = memory["torch-gather-bmm-scatter"]
    assert "error" not in measured, measured
    # the per-edge gathered weights alone are 40k x 8 x 8 float32 = 10 MB per layer
    assert 8 << 20 < measured["peak_bytes"] < 1 << 30
    assert measured["peak_rss_bytes"] >= measured["peak_bytes"] and measured["method"] in MEMORY_METHODS.values()


def test_synthetic_graph_specs_are_checked():
    assert parse_relational_spec("relational:10:2:30") == (10, 2, 30)
    assert parse_relational_spec("aifb") is None
    for bad in ("relational:10:2", "relational:0:2:30", "relational:10:99999:30"):
        with pytest.raises(ValueError, match="relational"):
            parse_relational_spec(bad)
    with pytest.raises(ValueError, match="unknown relational graph 'cora'"):
        check_relational_name("cora")
    graph = bench.load_graph("relational:50:3:200", seed=1)
    assert graph.shape == (50, 50) and graph.num_relations == 3 and 0 < graph.nnz <= 200
    assert np.array_equal(graph.indices, bench.load_graph("relational:50:3:200", seed=1).indices)


def test_the_command_line_documents_itself_and_refuses_bad_dims(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args("rgcn", ["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--dataset", "--dims", "--format", "--tune-budget-s", "--no-memory", "--json"):
        assert option in text
    with pytest.raises(SystemExit):
        parse_args("rgcn", ["--dims", "32", "0", "32"])
    args = parse_args("rgcn", ["--format", "default", "--format", "auto"])
    assert args.formats == [None, "auto"] and args.dataset == list(bench.DEFAULT_DATASETS)
    assert [bench.FAMILY.contender_name(f) for f in (None, "auto", "relcsr")] == ["sparsetir", "sparsetir-auto",
                                                                          "sparsetir[relcsr]"]


def test_a_probe_books_torchs_lazy_compiler_stack_to_no_contender():
    """sparsetir's layers are torch.library ops, whose first call imports torch._dynamo (about 56 MiB, the same
    for every graph): the probe imports it while warming torch up, so a small graph's peak is its own memory."""
    contenders = [bench.FAMILY.sparsetir_contender(None), *bench.FAMILY.baseline_contenders(["torch-relation-loop"])]
    memory = measure_memory("rgcn", contenders, {"dataset": "relational:500:4:2000", "dims": DIMS, "seed": 0},
                            threads=1)
    assert all("error" not in m for m in memory.values()), memory
    assert memory["sparsetir"]["peak_bytes"] < 24 << 20, memory["sparsetir"]  # 60+ MiB with the import booked
