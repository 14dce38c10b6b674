"""The README documents every make target and every workflow target and config."""

import re

from workflow_runner import CONFIGS, REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def test_every_make_target_is_documented():
    makefile = (REPO_ROOT / "Makefile").read_text()
    targets = re.search(r"^\.PHONY: (.*)$", makefile, re.M).group(1).split()
    for target in targets:
        if target in ("venv", "clean"):
            continue
        assert f"make {target}" in README, target


def test_every_workflow_target_config_and_profile_is_documented():
    for target in ("spmm", "sddmm", "attention", "conv", "rgcn", "sage"):
        assert target in README
    for config in CONFIGS.glob("*.yaml"):
        if config.name != "schema.yaml":
            assert config.name in README, config.name
    for profile in ("profiles/slurm", "profiles/kubernetes"):
        assert profile in README
