"""Compile a small C/C++ source into a shared library, atomically (the stub, the CUDA emulator)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path


def compile_shared_library(compiler: list[str], source: Path, library: Path, *, error=RuntimeError) -> Path:
    """Run ``compiler + ["-o", tmp, source]`` and rename the result to ``library``.

    Concurrent callers never see a half-written file. A failed compile raises ``error``
    with the command and the compiler's messages.
    """
    library.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{library.name}-", suffix=".tmp", dir=library.parent)
    os.close(fd)
    command = [*compiler, "-o", tmp, str(source)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            raise error(f"compiling {source} failed: {' '.join(command)}\n{proc.stderr[-4000:]}")
        os.replace(tmp, library)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return library
