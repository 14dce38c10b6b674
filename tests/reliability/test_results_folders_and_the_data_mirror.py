"""Each config writes its own results folder, and the data mirror is a config value.

Issue 13, item 10: the smoke run wrote into the same ``results/`` as the default run and replaced
its tables, and ``snakemake`` by hand (without the Makefile, which alone exported
``SPARSETIR_DATA_MIRROR``) silently marked every mirror-only graph unavailable.
"""

from __future__ import annotations

import os

import pytest
import yaml
from harness_config import SHARED_MIRROR, check_config, data_mirror, results_folder
from prepare_dataset import configure_data_routes
from workflow_runner import CONFIGS, run_snakemake

from sparsetir.data import MIRROR_ENV


def test_the_default_config_writes_results_and_any_other_config_its_own_folder():
    assert results_folder("auto") == "results"
    assert results_folder("auto", [CONFIGS / "default.yaml"]) == "results"
    assert results_folder("auto", [CONFIGS / "smoke.yaml"]) == "results/smoke"
    assert results_folder("auto", ["my/configs/nightly-cpu.yaml"]) == "results/nightly-cpu"
    assert results_folder("elsewhere/") == "elsewhere"  # a path given explicitly is used as it is


@pytest.mark.parametrize("name", ["spmm", "reference", "logs", "datasets"])
def test_a_config_named_after_a_folder_of_the_default_run_must_set_results_itself(name):
    with pytest.raises(ValueError, match=f"results/{name}, which the default run uses"):
        results_folder("auto", [f"{name}.yaml"])


def test_the_shipped_configs_say_auto():
    for name in ("default.yaml", "smoke.yaml", "gpu.yaml"):
        assert "\nresults: auto " in (CONFIGS / name).read_text(), name


def test_mirror_auto_takes_the_environment_then_the_shared_folder_then_none(monkeypatch, tmp_path):
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path))
    assert data_mirror("auto") == str(tmp_path.resolve())
    monkeypatch.delenv(MIRROR_ENV)
    assert data_mirror("auto") == (str(SHARED_MIRROR.resolve()) if SHARED_MIRROR.is_dir() else None)
    monkeypatch.setattr("harness_config.SHARED_MIRROR", tmp_path / "absent")
    assert data_mirror("auto") is None  # a machine without a mirror simply downloads
    assert data_mirror(None) is None
    assert data_mirror(str(tmp_path)) == str(tmp_path.resolve())


def test_a_job_uses_the_mirror_the_config_resolved_whatever_its_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(MIRROR_ENV, "/somewhere/the/makefile/said")
    configure_data_routes({"cache": str(tmp_path / "cache"), "mirror": None, "download": False})
    assert MIRROR_ENV not in os.environ  # null: no mirror, even with one in the environment
    configure_data_routes({"cache": str(tmp_path / "cache"), "mirror": str(tmp_path), "download": False})
    assert os.environ[MIRROR_ENV] == str(tmp_path.resolve())


def test_by_hand_and_through_make_the_default_config_resolves_the_same_mirror(monkeypatch, tmp_path):
    if not SHARED_MIRROR.is_dir():
        pytest.skip(f"no shared mirror at {SHARED_MIRROR}")
    monkeypatch.chdir(tmp_path)
    resolved = []
    for exported in (None, str(SHARED_MIRROR)):  # by hand, then as the Makefile exports it
        if exported is None:
            monkeypatch.delenv(MIRROR_ENV, raising=False)
        else:
            monkeypatch.setenv(MIRROR_ENV, exported)
        config = check_config(yaml.safe_load((CONFIGS / "default.yaml").read_text()))
        resolved.append(config["data"]["mirror"])
    assert resolved[0] == resolved[1] == str(SHARED_MIRROR.resolve())


@pytest.mark.slow
def test_the_smoke_plan_writes_only_under_results_smoke(tmp_path):
    result = run_snakemake(tmp_path, "-n", "--cores", "1", "--configfile", str(CONFIGS / "smoke.yaml"))
    assert result.returncode == 0, result.stdout[-3000:]
    outputs = [line.split("output: ", 1)[1] for line in result.stdout.splitlines() if "output: " in line]
    paths = [path.strip(",") for line in outputs for path in line.split()]
    assert paths and all(path.startswith("results/smoke/") for path in paths), paths
