"""The R-GCN family's training experiment (rgcn-train, in sparsetir.bench.families.rgcn): every contender
starts from the same weights, is scored and timed interleaved; a failing or unavailable one gets a record
saying why; its command line is the generic trainer's (python -m sparsetir.bench rgcn-train)."""

from __future__ import annotations

import pytest

from sparsetir.bench.__main__ import main
from sparsetir.bench.families import trainers
from sparsetir.bench.families.rgcn import RGCNTrainSettings, benchmark_rgcn_training, rgcn_training_contenders
from sparsetir.bench.families.rgcn import rgcn_training_summary as summary
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


def test_the_command_line_runs_the_declared_trainer_and_refuses_bad_names(capsys):
    assert trainers()["rgcn-train"].datasets == ("aifb", "mutag")
    with pytest.raises(SystemExit) as exit_:
        main(["rgcn-train", "--dataset", "no-such-graph"])
    assert exit_.value.code == 2 and "no-such-graph" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["rgcn-train", "--dataset", "relational:300:5:2000", "--baseline", "pyg-gcn", "--threads", "1"])
    assert exit_.value.code == 2 and "unknown rgcn-train baseline" in capsys.readouterr().err
    assert main(["--help"]) == 0 and "rgcn-train" in capsys.readouterr().err
