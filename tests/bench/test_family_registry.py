"""The family registry: every module of sparsetir.bench.families registers the family of its name, the
workflow and the command line read that one table, and the base class's engine checks before it times."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sparsetir.bench.families import families, family, family_names
from sparsetir.bench.family import Contender, Family
from sparsetir.reference import Case
from sparsetir.timing import TimingPolicy

SCRIPTS = Path(__file__).resolve().parents[2] / "workflows" / "scripts"
TINY = TimingPolicy(flush=False, samples=3, min_samples=3, warmup_s=0.0, min_warmup=0, max_time_s=None, sentinel=False)


def test_every_module_registers_the_family_of_its_name_and_the_workflow_reads_the_registry():
    sys.path.insert(0, str(SCRIPTS))
    from harness_config import FAMILIES

    registry = families()
    assert tuple(registry) == family_names() == FAMILIES == ("attention", "conv", "gat", "rgcn", "sage")
    for name, declared in registry.items():
        assert isinstance(declared, Family) and declared.name == name and declared.title
    with pytest.raises(ValueError, match="unknown experiment family 'spmv'; known: attention, conv, gat, rgcn, sage"):
        family("spmv")


def test_one_command_line_lists_the_families_and_refuses_an_unknown_one():
    listed = subprocess.run([sys.executable, "-m", "sparsetir.bench"], capture_output=True, text=True)
    assert listed.returncode == 2 and "{attention,conv,gat,rgcn,sage,rgcn-train}" in listed.stderr
    assert "training experiments: rgcn-train" in listed.stderr  # a family's declared training, by its name
    unknown = subprocess.run([sys.executable, "-m", "sparsetir.bench", "spmv"], capture_output=True, text=True)
    assert unknown.returncode == 2


class _Doubling(Family):
    """A toy family: inputs are a vector, the reference doubles it (float64)."""

    name = "doubling-test"

    def reference(self, inputs):
        expected = 2.0 * np.asarray(inputs, dtype=np.float64)
        return Case((inputs,), expected, np.full_like(expected, 1e-6), 0)

    def reference_names(self, rows, contenders):
        return ["slow"]


def test_the_engine_checks_every_contender_before_it_times_the_correct_ones():
    toy, x = _Doubling(), np.arange(4.0)
    calls = []

    def counted(factory):
        def build(inputs):
            run = factory(inputs)

            def counted_run():
                calls.append(1)
                return run()
            return counted_run
        return build

    def broken(inputs):
        raise RuntimeError("cannot build")

    contenders = [Contender("fast", lambda v: (lambda: 2 * v), kind="sparsetir"),
                  Contender("slow", lambda v: (lambda: (sum([0] * 2000), 2 * v)[1])),
                  Contender("wrong", counted(lambda v: (lambda: 3 * v))), Contender("broken", broken),
                  Contender("missing", None, reason="not installed")]
    rows = toy.check(contenders, x, toy.reference(x))
    by_name = {row.contender: row for row in rows}
    assert by_name["wrong"].error.startswith("wrong result") and by_name["wrong"].run is None and calls == [1]
    assert by_name["broken"].error == "failed to build: RuntimeError: cannot build"
    assert by_name["missing"].error == "unavailable: not installed"
    best, _ = toy.time(rows, TINY, contenders)
    assert best == "slow" and by_name["slow"].speedup_vs_best == pytest.approx(1.0) and calls == [1]
    assert by_name["fast"].stats.n == 3 and by_name["wrong"].stats is None
    record = toy.record(by_name["broken"], contenders[3], dataset="toy", feat=4, provenance={})
    assert record["status"] == "failed" and record["experiment"] == "doubling-test"
