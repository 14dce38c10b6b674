"""The GAT training entry point (sparsetir.bench.gat): every contender (sparsetir, PyG, DGL) builds
the same model from the shared state_dict, is scored and timed interleaved, with its peak memory;
the workflow's training tables judge it against the best baseline."""

from __future__ import annotations

import pytest
import torch

from sparsetir.bench.gat import GATSettings, _initial_state, benchmark_gat_training, gat_contenders, gat_task, summary
from sparsetir.bench.training import TRAINING_POLICY


@pytest.fixture(scope="module")
def cora_task():
    return gat_task("cora", GATSettings(epochs=1))


def test_every_contender_computes_the_same_model_from_the_shared_weights(cora_task):
    state = _initial_state(cora_task.dims, 0)
    outputs = {}
    for name, contender in gat_contenders().items():
        if isinstance(contender, str):
            pytest.skip(f"{name}: {contender}")
        model = contender.model(cora_task.dims, {k: v.clone() for k, v in state.items()}).eval()
        with torch.no_grad():
            outputs[name] = contender.forward(model, contender.structure(cora_task), cora_task.x)
    assert set(outputs) == {"sparsetir", "pyg-gatconv", "dgl-gatconv"}
    for name, out in outputs.items():
        torch.testing.assert_close(out, outputs["pyg-gatconv"], rtol=1e-4, atol=1e-4, msg=name)


def test_training_records_time_accuracy_and_peak_memory(tmp_path):
    policy = TRAINING_POLICY.replace(samples=2, min_samples=1, flush=False)
    records = benchmark_gat_training("cora", GATSettings(epochs=2), contenders=gat_contenders(["pyg-gatconv"]),
                                     policy=policy, log=lambda line: None)
    by_name = {r["contender"]: r for r in records}
    assert set(by_name) == {"sparsetir", "pyg-gatconv"}
    for record in records:
        assert record["status"] == "ok" and record["experiment"] == "gat" and record["stats"]["n"] == 2
        assert 0 <= record["test_acc"] <= 1 and record["peak_memory_bytes"] > 0 and record["labelled"]
    assert "ms/epoch" in summary(records)

    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workflows" / "scripts"))
    from training_family import markdown, summary_frame

    table = summary_frame(records + [{**records[0], "contender": "dgl-gatconv", "status": "unavailable",
                                      "reason": "unavailable: no dgl", "stats": None}])
    mine = table[table["contender"] == "sparsetir"].iloc[0]
    assert mine["best_baseline"] == "pyg-gatconv" and mine["speedup_vs_best_baseline"] > 0
    assert mine["peak_vs_pyg"] > 0
    text = markdown(table, "gat", 2.0)
    assert "geometric mean" in text and "target 2.0x" in text and "no dgl" in text
    import json

    from training_family import tables

    (tmp_path / "r.json").write_text(json.dumps(records))
    paths = {ext: tmp_path / f"speedup.{ext}" for ext in ("csv", "md", "tex")}
    tables(records_paths=[tmp_path / "r.json"], experiment="gat", target=2.0, **paths)
    assert "Interference (the sentinel" in paths["md"].read_text()  # its rounds and contaminated cases


def test_an_unknown_baseline_is_refused():
    with pytest.raises(ValueError, match="unknown gat baseline .pyg-gcn."):
        gat_contenders(["pyg-gcn"])
