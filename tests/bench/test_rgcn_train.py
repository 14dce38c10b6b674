"""The R-GCN training entry point (sparsetir.bench.rgcn_train): every contender starts from the same
weights, is scored and timed interleaved; a failing or unavailable one gets a record saying why."""

from __future__ import annotations

import pytest

from sparsetir.bench.rgcn_train import RGCNTrainSettings, benchmark_rgcn_training, rgcn_training_contenders, summary
from sparsetir.bench.training import TRAINING_POLICY


class Broken:
    name = "broken"

    def available(self):
        return True, "always"

    def model(self, dims, state):
        raise RuntimeError("no model here")


def test_training_records_time_accuracy_and_the_reasons_of_the_others():
    contenders = rgcn_training_contenders(["pyg-fastrgcnconv"])
    contenders["broken"] = Broken()
    contenders["missing"] = "unavailable: not installed here"
    policy = TRAINING_POLICY.replace(samples=2, min_samples=1, flush=False)
    records = benchmark_rgcn_training("relational:300:5:2000", RGCNTrainSettings(epochs=3, bases=3),
                                      contenders=contenders, policy=policy, log=lambda line: None)
    by_name = {r["contender"]: r for r in records}
    assert by_name["sparsetir"]["status"] == by_name["pyg-fastrgcnconv"]["status"] == "ok"
    for name in ("sparsetir", "pyg-fastrgcnconv"):
        record = by_name[name]
        assert record["stats"]["n"] == 2 and record["stats"]["median"] > 0 and 0 <= record["test_acc"] <= 1
        assert record["experiment"] == "rgcn-train" and record["provenance"]["loadavg"]
    # same weights, same data, deterministic training: the same losses after three epochs
    assert by_name["sparsetir"]["final_loss"] == pytest.approx(by_name["pyg-fastrgcnconv"]["final_loss"], rel=1e-4)
    assert by_name["broken"]["status"] == "failed" and "no model here" in by_name["broken"]["reason"]
    assert by_name["missing"]["status"] == "unavailable"
    assert "ms/epoch" in summary(records)


def test_an_unknown_baseline_is_refused():
    with pytest.raises(ValueError, match="unknown rgcn-train baseline .pyg-gcn."):
        rgcn_training_contenders(["pyg-gcn"])
