"""The reliability suite (issue 13): the workflow's scripts and runner are importable from here."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "workflow"))
sys.path.insert(0, str(ROOT / "workflows" / "scripts"))
