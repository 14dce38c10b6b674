"""Pre-flight: every dataset the config's experiments read, its routes asked before any job runs.

``rules/common.smk`` calls :func:`preflight` when the workflow is planned, dry runs included: it
lists the real datasets of every configured experiment (SpMM and SDDMM cases, the R-GCN graphs, the
point clouds, the GraphSAGE graphs with their features and labels, PrunedBERT's DLMC weights;
generated inputs need no data), probes each file through the routes the config's ``data:`` section
sets (embedded ``data/``, cache, mirror, download; ``sparsetir.data.availability.survey``) and
prints one table: what was found where, what will be downloaded, and every dataset that cannot be
had, with the routes tried and why. Its ``onstart`` hook keeps the rows in
``<results>/data_availability.json``, which the end-of-run screen (``sparsetir.bench.report.endrun``)
reads to name every dataset the run could not get, grouped by reason.

The table is printed once per workflow run: the environment variable :data:`SHOWN_ENV` marks it for
any snakemake process the run starts (cluster jobs re-read the Snakefile).
"""

import contextlib
import os
import sys
from pathlib import Path

SHOWN_ENV = "SPARSETIR_DATA_PREFLIGHT_SHOWN"
#: The experiments whose datasets the table covers, in the order they are listed.
SPMM_LIKE = ("spmm", "sddmm")


def needs_of(config: dict) -> list:
    """One ``sparsetir.data.availability.Need`` per real dataset (name and files) the config reads."""
    from harness_config import cases

    from sparsetir.bench.families import families
    from sparsetir.data import entry, names
    from sparsetir.data.availability import Need

    registry = set(names())
    found: dict[tuple, tuple[str, tuple, list]] = {}  # (name, relpaths) -> (label, files, users)

    def add(name: str, files: tuple, user: str, label: str | None = None) -> None:
        _, _, users = found.setdefault((name, tuple(file.relpath for file in files)), (label or name, files, []))
        if user not in users:
            users.append(user)

    for experiment in config.get("experiments") or {}:
        for name in dict.fromkeys(name for name, _feat in cases(config)):
            if name in registry:
                add(name, entry(name).files, experiment)
    for family, declared in families().items():
        if config.get(family) is not None:
            for name, files, user, label in declared.data_needs(config[family]):
                add(name, files, user, label)
    return [Need(label, files, tuple(users)) for label, files, users in found.values()]


@contextlib.contextmanager
def data_routes(data: dict):
    """The registry's routes as the config's ``data:`` section sets them for the jobs, for this block only."""
    from prepare_dataset import configure_data_routes

    from sparsetir.data import CACHE_ENV, DOWNLOAD_ENV, MIRROR_ENV

    saved = {name: os.environ.get(name) for name in (CACHE_ENV, DOWNLOAD_ENV, MIRROR_ENV)}
    try:
        configure_data_routes(data)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def preflight(config: dict, *, stream=None):
    """Survey the config's datasets and print the table on ``stream`` (standard output); the rows.

    ``None`` when an earlier snakemake process of this run already did (:data:`SHOWN_ENV`).
    """
    from sparsetir.data.availability import format_table, survey

    if os.environ.get(SHOWN_ENV):
        return None
    with data_routes(config["data"]):
        rows = survey(needs_of(config), allow_download=bool(config["data"]["download"]))
    print(format_table(rows), file=stream or sys.stdout, flush=True)
    os.environ[SHOWN_ENV] = "1"
    return rows


def keep(rows, results: str, data: dict) -> Path | None:
    """Write the rows to ``<results>/data_availability.json`` (the workflow's ``onstart``; not on dry runs)."""
    from sparsetir.data.availability import SURVEY_FILE, write_survey

    if rows is None:
        return None
    cache = data.get("cache")
    data = {**data, "cache": str(Path(cache).resolve()) if cache else None}  # as the jobs resolve it
    return write_survey(Path(results) / SURVEY_FILE, rows, data=data)
