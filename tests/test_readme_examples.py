"""The Python examples in README.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # examples may export files
    exec(compile(BLOCKS[index], f"README.md[{index}]", "exec"), {})
    assert len(BLOCKS) >= 2
