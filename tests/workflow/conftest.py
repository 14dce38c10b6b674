"""The workflow tests need snakemake (the bench extra) and import their runner from this folder."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "workflows" / "scripts"
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(SCRIPTS))

# speedup_tables is imported by its file name (as Snakemake's scripts import it) and is also the module
# workflows.scripts.speedup_tables: mutmut names its mutants by the file's path (docs/mutation.md).
_spec = importlib.util.spec_from_file_location("workflows.scripts.speedup_tables", SCRIPTS / "speedup_tables.py")
_speedup_tables = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = sys.modules["speedup_tables"] = _speedup_tables
_spec.loader.exec_module(_speedup_tables)

from workflow_runner import SNAKEMAKE  # noqa: E402

if not SNAKEMAKE.exists():  # pragma: no cover - make test installs the bench extra
    pytest.exit(f"{SNAKEMAKE} is missing: install the bench extra (make test does)", returncode=1)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The smoke workflow run, killed after its first finished case and resumed, once per session:
    (workdir, the records kept from the killed run, the resumed run's log); see smoke_runner.py."""
    from smoke_runner import run_killed_and_resumed  # noqa: PLC0415 - only the tests that run it

    return run_killed_and_resumed(tmp_path_factory)
