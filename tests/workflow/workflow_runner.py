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
