"""Workflow step: resolve or generate one dataset and store it as a float32 CSR ``.npz``.

Writes ``<results>/datasets/<slug>.json`` (status, reason, shape, nnz, the ``.npz`` path). A
dataset that no route provides (no mirror, no network), or whose file is refused (checksum),
gets ``status: unavailable`` with the reason, and the workflow goes on.
"""


import os
import sys
from pathlib import Path


def configure_data_routes(data: dict) -> None:
    """Point the registry's routes at the config: cache folder, mirror, downloads on/off.

    ``data["mirror"]`` is the folder ``check_config`` resolved (``auto`` included), or None: no mirror,
    whatever the environment says, so a run by hand and one through ``make`` use the same routes.
    """
    from harness_config import data_mirror

    from sparsetir.data import CACHE_ENV, DOWNLOAD_ENV, MIRROR_ENV

    os.environ[CACHE_ENV] = str(Path(data["cache"]).resolve())
    mirror = data_mirror(data.get("mirror"))
    if mirror:
        os.environ[MIRROR_ENV] = mirror
    else:
        os.environ.pop(MIRROR_ENV, None)
    os.environ[DOWNLOAD_ENV] = "1" if data["download"] else "0"


def save_npz_atomic(path: Path, matrix) -> None:
    """``indptr``/``indices``/``data``/``shape`` in an ``.npz``, written atomically."""
    import io

    import numpy as np

    from sparsetir.bench.records import write_bytes_atomic

    buffer = io.BytesIO()
    np.savez(buffer, indptr=matrix.indptr, indices=matrix.indices, data=matrix.data, shape=np.array(matrix.shape))
    write_bytes_atomic(path, buffer.getvalue())


def prepare(name: str, output: Path, data: dict, seed: int) -> dict:
    """Resolve/generate ``name``; write its ``.npz`` beside ``output``; return the status document."""
    from sparsetir.bench.datasets import load_matrix
    from sparsetir.bench.records import write_json_atomic

    configure_data_routes(data)
    document = {"name": name, "status": "ok", "reason": None}
    try:
        matrix = load_matrix(name, seed)
    except (OSError, ValueError, TypeError, KeyError) as error:
        document.update(status="unavailable", reason=f"unavailable: {type(error).__name__}: {error}")
        print(f"dataset {name}: {document['reason']}", file=sys.stderr)
    else:
        npz = output.with_suffix(".npz")
        save_npz_atomic(npz, matrix)
        document.update(npz=str(npz), shape=list(matrix.shape), nnz=int(matrix.nnz))
        print(f"dataset {name}: {matrix.shape[0]:,} x {matrix.shape[1]:,}, {matrix.nnz:,} non-zeros", file=sys.stderr)
    write_json_atomic(output, document)
    return document


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        prepare(snakemake.params.name, Path(snakemake.output[0]), snakemake.params.data, snakemake.params.seed)
