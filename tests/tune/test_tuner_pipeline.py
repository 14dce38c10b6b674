"""The tuner's pipeline: overlapped compiling picks what the plain pipeline picks, compiled kernels
serve other matrices, and each case reports what it compiled and measured."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.tune import SearchSpace, TuningDatabase, tune_spmm
from sparsetir.tune.space import config_key

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _space(formats, knobs):
    return lambda op, matrix, device: SearchSpace(op, device, list(formats), dict(knobs))


@pytest.mark.slow
def test_overlapped_compiling_picks_what_the_plain_pipeline_picks(tmp_path, monkeypatch):
    # ELL padded to 1024 or 2048 columns does hundreds of times CSR's work on this matrix (5 entries a
    # row): the pick is CSR however loaded the machine is
    monkeypatch.setattr("sparsetir.tune.tuner.search_space", _space(["csr", "ell:2048", "ell:1024"], {"unroll": (16,)}))
    A = sp.random(1000, 1000, density=0.005, format="csr", random_state=1, dtype=np.float32)
    database = TuningDatabase(tmp_path / "db.jsonl")
    with open(database.path, "w") as handle:  # damaged records: the cost model skips them, the tuner goes on
        handle.write('{"key_hash": "a", "key": {"op": "spmm"}, "config": {"format": "csr"}}\n{"cut off\n')
        handle.write(json.dumps({"key_hash": "b", "key": {"op": "spmm", "target": {"kind": "llvm"}},
                                 "config": {"format": "csr"}, "measurements": "none"}) + "\n")
    results = {}
    for overlap in (False, True):  # batches of two (one worker): the second compiles while the first is timed
        with pytest.warns(UserWarning):
            results[overlap] = tune_spmm(A, 64, budget_s=120, trials=3, workers=1, database=database,
                                         use_database=False, overlap=overlap, progress=False)
    plain, overlapped = results[False], results[True]
    assert overlapped.overlap and not plain.overlap
    assert [config_key(m["config"]) for m in overlapped.measurements] == \
        [config_key(m["config"]) for m in plain.measurements]
    assert plain.measured == overlapped.measured == 3
    assert overlapped.config == plain.config == {"format": "csr", "unroll": 16}


@pytest.mark.slow
def test_a_second_matrix_reuses_every_compiled_kernel_but_the_specialized_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPARSETIR_CACHE_DIR", str(tmp_path / "cache"))  # a cold kernel cache
    monkeypatch.setattr("sparsetir.tune.tuner.search_space",
                        _space(["csr"], {"prefetch": (0, 8), "specialize": (False, True)}))
    database = TuningDatabase(tmp_path / "db.jsonl")
    first_matrix = sp.random(300, 250, density=0.03, format="csr", random_state=2, dtype=np.float32)
    second_matrix = sp.random(500, 400, density=0.01, format="csr", random_state=3, dtype=np.float32)
    options = {"budget_s": 120, "trials": 4, "workers": 1, "strategy": "exhaustive", "database": database,
               "cost_model": False}
    first = tune_spmm(first_matrix, 16, bound_s=1e-6, **options)
    assert first.compiled == first.measured == 4 and first.kernels_built >= 2
    second = tune_spmm(second_matrix, 16, progress=False, **options)
    assert second.compiled == second.measured == 4
    # sizes are symbolic: only a kernel specialized to the matrix's sizes is built again
    assert [m["built"] for m in second.measurements if not m["config"]["specialize"]] == [False, False]
    assert any(m["built"] for m in second.measurements if m["config"]["specialize"])
    assert second.kernels_built == sum(m["built"] for m in second.measurements)

    report = first.to_dict()
    assert report["compiled"] == report["measured"] == 4 and report["kernels_built"] == first.kernels_built
    assert report["bound_s"] == 1e-6 and 0 < report["fraction_of_bound"] < 1
    assert report["median_s"] > 0 and report["default_median_s"] > 0
    done = [line for line in capsys.readouterr().err.splitlines() if " done in " in line]
    assert len(done) == 1
    assert re.search(r": 4 compiled \(\d built, \d from the kernel cache\), 4 measured; default \d+\.\d+ ms, "
                     r"best \d+\.\d+ ms .*, bound 0\.001 ms \(best at \d+% of it\)", done[0]), done[0]
    hit = tune_spmm(first_matrix, 16, progress=False, **{**options, "trials": 1})
    assert hit.from_database and (hit.compiled, hit.kernels_built, hit.measured) == (4, first.kernels_built, 4)
