"""The workflow tests need snakemake (the bench extra) and import their runner from this folder."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workflows" / "scripts"))

from workflow_runner import SNAKEMAKE  # noqa: E402

if not SNAKEMAKE.exists():  # pragma: no cover - make test installs the bench extra
    pytest.exit(f"{SNAKEMAKE} is missing: install the bench extra (make test does)", returncode=1)
