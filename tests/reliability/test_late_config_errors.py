"""A config that would fail (or silently do nothing) at run time is refused before any job runs.

Issue 13, item 9: unknown format strings (``nosuch``, ``bsr:0``), an unknown ``reference.cpu``,
unknown CPU libraries, a nonexistent ``data.mirror`` (silently ignored), ``results: /`` and
generator sizes of 1e10 edges all passed validation. ``check_config`` (which the Snakefile calls
before any job) now refuses each with a message naming the key.
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from harness_config import AUTO, check_config
from workflow_runner import CONFIGS, run_snakemake

SMOKE = yaml.safe_load((CONFIGS / "smoke.yaml").read_text())


def _checked(change, tmp_path, monkeypatch):
    config = copy.deepcopy(SMOKE)
    change(config)
    monkeypatch.chdir(tmp_path)  # the working tree
    return check_config(config, [str(CONFIGS / "smoke.yaml")])


def _spmm(config):
    return config["experiments"]["spmm"]


BAD = {
    "an unknown format": (lambda c: _spmm(c)["sparsetir"].update(x="nosuch"),
                          r"experiments\.spmm\.sparsetir\.x: unknown format 'nosuch'"),
    "a block of 0": (lambda c: _spmm(c)["sparsetir"].update(x="bsr:0"), r"experiments\.spmm\.sparsetir\.x: .*bsr:0"),
    "a format the op lacks": (lambda c: c["experiments"]["sddmm"]["sparsetir"].update(x="dbsr:4"),
                              r"does not support sddmm"),
    "an unknown reference.cpu": (lambda c: _spmm(c).update(reference={"cpu": "mkl", "cuda": "torch-csr-i32"}),
                                 r"experiments\.spmm\.reference\.cpu: unknown contender 'mkl'"),
    "an unknown reference.cuda": (lambda c: _spmm(c).update(reference={"cpu": "best-cpu-library", "cuda": "cusparselt"}),
                                  r"reference\.cuda: unknown contender 'cusparselt'"),
    "a reference nobody runs": (lambda c: c["experiments"]["sddmm"].update(
        baselines=["scipy_sparse"], reference={"cpu": "torch-sampled-addmm", "cuda": "torch-sampled-addmm"}),
                                r"reference\.cpu: 'torch-sampled-addmm' comes from the baseline module torch_sparse"),
    "an unknown CPU library": (lambda c: _spmm(c).update(cpu_libraries=["scipy", "mkl"]),
                               r"experiments\.spmm\.cpu_libraries: unknown library 'mkl'"),
    "a library of the other op": (lambda c: c["experiments"]["sddmm"].update(cpu_libraries=["torch-csr-i32"]),
                                  r"experiments\.sddmm\.cpu_libraries: unknown library 'torch-csr-i32'"),
    "options for an unknown variant": (lambda c: _spmm(c)["options"].update(mkl={}),
                                       r"experiments\.spmm\.options: unknown variant 'mkl'"),
    "a mirror that does not exist": (lambda c: c["data"].update(mirror="/no/such/mirror"),
                                     r"data\.mirror: '/no/such/mirror' is not a directory"),
    "results at the root": (lambda c: c.update(results="/"), r"results: '/' is not a folder inside the working tree"),
    "results above the tree": (lambda c: c.update(results="../elsewhere"), r"results: '\.\./elsewhere' is not a folder"),
    "results as the tree itself": (lambda c: c.update(results="."), r"results: '\.' is not a folder inside"),
    "1e10 synthetic entries": (lambda c: c.update(datasets=["synthetic:100000x100000:1"]),
                               r"datasets: generator spec 'synthetic:100000x100000:1' is too large"),
    "1e10 R-MAT edges": (lambda c: c.update(datasets=["rmat:29:16"]), r"generator spec 'rmat:29:16' is too large"),
    "a smoke config without one family": (lambda c: c.pop("attention"), r"every_family: no section for attention"),
    "a family left out that does not exist": (lambda c: c["left_out"].update(spmv="why"),
                                              r"left_out: unknown family spmv"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_late_error_is_refused_before_any_job(tmp_path, monkeypatch, case):
    change, message = BAD[case]
    with pytest.raises(ValueError, match=message):
        _checked(change, tmp_path, monkeypatch)


GOOD = {
    "auto, hyb and tuned formats": lambda c: _spmm(c)["sparsetir"].update(a=AUTO, h="hyb", t="tuned"),
    "bsr and its block": lambda c: _spmm(c)["sparsetir"].update(b="bsr", b4="bsr:4"),
    "a sparsetir contender as the reference": lambda c: _spmm(c).update(reference={"cpu": "sparsetir-csr",
                                                                                  "cuda": "torch-csr-i32"}),
    "a mirror that exists": lambda c: c["data"].update(mirror=str(CONFIGS)),
    "results inside the tree": lambda c: c.update(results="out/run1"),
    "the largest generated graph": lambda c: c.update(datasets=["rmat:23:16"]),
}


@pytest.mark.parametrize("case", list(GOOD))
def test_what_works_today_is_still_accepted(tmp_path, monkeypatch, case):
    assert _checked(GOOD[case], tmp_path, monkeypatch)


def test_the_shipped_configs_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("default.yaml", "smoke.yaml", "gpu.yaml"):
        check_config(yaml.safe_load((CONFIGS / name).read_text()), [str(CONFIGS / name)])


@pytest.mark.slow
def test_snakemake_stops_on_a_bad_format_before_planning_a_job(tmp_path):
    config = copy.deepcopy(SMOKE)
    _spmm(config)["sparsetir"]["x"] = "bsr:0"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "-n", "--configfile", str(path))
    assert result.returncode != 0
    assert re.search(r"ValueError .*\n.*experiments\.spmm\.sparsetir\.x: .*bsr:0", result.stdout), result.stdout[-3000:]
    assert "Job stats" not in result.stdout and not (tmp_path / "results").exists()
