"""The GraphSAGE training benchmark: every contender starts from the same weights and trains the same model
(so with dropout off they reach the same accuracy), graphs without labels give times only, and a graph no
route provides gives rows that say why."""

from __future__ import annotations

import pytest

from sparsetir.bench.sage import SageSettings, run_sage

pytestmark = pytest.mark.slow  # imports PyG and DGL and trains every contender: about 15 s
SETTINGS = SageSettings(hidden=16, layers=2, dropout=0.0, epochs=4, warmup=1, fanouts=(5, 5), batch_size=512)


def test_every_contender_trains_the_same_model_from_the_same_weights():
    records = run_sage("cora", "full", SETTINGS, contenders={"sparsetir": {}, "sparsetir-sparse-x":
                                                             {"sparse_features": "auto"}},
                       baselines=["pyg-csr", "dgl"], log=lambda line: None)
    ok = {r["contender"]: r for r in records if r["status"] == "ok"}
    assert {"sparsetir", "sparsetir-sparse-x", "pyg-csr"} <= set(ok)
    accuracies = [r["test_acc"] for r in ok.values()]
    assert max(accuracies) - min(accuracies) <= 0.01, {name: r["test_acc"] for name, r in ok.items()}
    for record in ok.values():
        assert len(record["epoch_s"]) == 4 and record["median_ms"] > 0 and record["compile_s"] >= 0
        assert record["labelled"] and record["provenance"]["loadavg"]
    assert ok["sparsetir"]["kernel_compile_s"] is not None and ok["pyg-csr"]["kernel_compile_s"] is None
    for name, record in ok.items():  # one profiled epoch each: sparse, dense and the rest
        split = record["epoch_split"]
        assert split["sparse"] > 0 and split["dense"] > 0, name  # DGL's SpMM too (labelled while profiled)
        assert split["sparse"] + split["dense"] + split["rest"] == pytest.approx(1.0, abs=1e-3)


def test_mini_batches_a_time_only_graph_and_an_unavailable_one():
    records = run_sage("rmat:8:4", "minibatch", SETTINGS, contenders={"sparsetir": {}, "sparsetir-compiled":
                                                                      {"compiled": True}},
                       baselines=["pyg-csr"], log=lambda line: None)
    by_name = {r["contender"]: r for r in records}
    assert by_name["sparsetir"]["status"] == "ok" and by_name["sparsetir"]["batches"] >= 1
    assert by_name["sparsetir"]["labelled"] is False and by_name["sparsetir"]["test_acc"] is None
    assert by_name["sparsetir-compiled"]["status"] == "unavailable"
    assert "full-graph training only" in by_name["sparsetir-compiled"]["reason"]
    missing = run_sage("no-such-graph", "full", SETTINGS, baselines=["dgl"], log=lambda line: None)
    assert [r["status"] for r in missing] == ["unavailable", "unavailable"]
    assert "no-such-graph" in missing[0]["reason"]


def test_a_flagged_epoch_is_left_out_of_every_contenders_statistics(monkeypatch):
    from sparsetir.timing import interference

    judge = interference.Sentinel.judge
    calls = []

    def flag_the_third_round(self, rounds):  # the sentinel's verdict: epoch 2 flagged, the others clean
        verdict = judge(self, rounds)  # probes and traces as ever (whatever this machine is doing now)
        calls.append(rounds)
        return interference.Verdict(len(calls) == 3, (), 0.0, 0.0, verdict.probe)

    monkeypatch.setattr(interference.Sentinel, "judge", flag_the_third_round)
    settings = SageSettings(hidden=8, layers=2, dropout=0.0, epochs=6, warmup=1, fanouts=(5, 5))
    records = run_sage("rmat:8:4", "full", settings, contenders={"sparsetir": {}}, baselines=["pyg-csr"],
                       log=lambda line: None)
    ok = [r for r in records if r["status"] == "ok"]
    assert len(ok) == 2 and calls == [1] * 6  # one judgement per epoch round of both contenders
    for record in ok:
        account = record["stats"]["interference"]
        assert account["judged"] and account["rounds"] == 5 and account["flagged"] == 1 and account["kept"] == 4
        assert not account["contaminated"] and not account["flagged_kept"] and len(account["trace"]["t"]) == 6
        kept = [t for i, t in enumerate(record["epoch_s"]) if i >= 1 and i != 2]
        assert record["stats"]["samples"] == kept and record["stats"]["n"] == 4
    assert ok[0]["stats"]["interference"] == ok[1]["stats"]["interference"]  # one account for the case
