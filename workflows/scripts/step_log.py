"""Send a workflow step's output to the log file its rule declares (``log:`` in workflows/rules/).

Snakemake redirects nothing for ``script:`` rules, so each script wraps its work in::

    if "snakemake" in globals():
        with output_to_log(snakemake.log[0]):
            main(...)

Both Python's ``sys.stdout``/``sys.stderr`` and the process's file descriptors 1 and 2 go to the
log, so messages from TVM's C++ code and from worker processes land there too. An exception is
written to the log with its traceback and raised again: the step still fails, the traceback also
reaches the terminal, and snakemake names the log in its error summary.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

__all__ = ["output_to_log"]


@contextlib.contextmanager
def output_to_log(path: str | os.PathLike) -> Iterator[None]:
    """Write stdout and stderr to ``path`` (created or truncated) until the block ends."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved_fds = {fd: os.dup(fd) for fd in (1, 2)}
    with path.open("w", buffering=1) as log:
        try:
            for fd in saved_fds:
                os.dup2(log.fileno(), fd)
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                try:
                    yield
                except BaseException:
                    traceback.print_exc(file=log)
                    raise
        finally:
            log.flush()
            for fd, saved in saved_fds.items():
                os.dup2(saved, fd)
                os.close(saved)
