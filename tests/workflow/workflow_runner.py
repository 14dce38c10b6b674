"""Run the repository's Snakefile in a scratch folder, as a user would from the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
CONFIGS = REPO_ROOT / "workflows" / "config"


def snakemake_command(workdir: Path, *args: str) -> list[str]:
    return [str(SNAKEMAKE), "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory", str(workdir), *args]


def run_snakemake(workdir: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """``snakemake <args>`` in ``workdir``; stdout and stderr together in ``.stdout``."""
    return subprocess.run(snakemake_command(workdir, *args), cwd=REPO_ROOT, env=dict(os.environ),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


#: Loads the workflow (default config) through Snakemake's API and prints each rule's threads and
#: whether it is a local rule, as JSON: the rules families.smk makes from the registry included.
_RULES_PROBE = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ResourceSettings
with SnakemakeApi() as api:
    workflow = api.workflow(resource_settings=ResourceSettings(cores=int(sys.argv[1])),
                            snakefile=Path(sys.argv[2]))._workflow
    threads = {rule.name: rule.resources.get("_cores") for rule in workflow.rules}
    print(json.dumps({name: {"threads": getattr(value, "value", value), "local": name in workflow._localrules}
                      for name, value in threads.items()}))
"""


def loaded_rules(cores: int) -> dict[str, dict]:
    """Every rule of the workflow under the default config with ``--cores cores``: ``{"threads", "local"}``."""
    import json

    result = subprocess.run([sys.executable, "-c", _RULES_PROBE, str(cores), str(REPO_ROOT / "Snakefile")],
                            cwd=REPO_ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=600,
                            check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])
