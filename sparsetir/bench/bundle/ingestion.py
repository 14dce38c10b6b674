"""Ingest the records a bundle run brought back: the best candidate per case into the tuning
database, and the records into ``results/reference/gpu/`` for the speedup tables.

For every (device, dataset, feature size) the fastest correct candidate (by median) is added
to the tuning database under the key the bundle was built with (source ``"bundle"``), so
``ops.spmm(..., format="auto", target="cuda")`` finds it. The reference folder gets, per case,
the baselines' records plus three sparsetir records renamed to the contenders the spmm tables
know: ``sparsetir-tuned`` (the best candidate), ``sparsetir-csr`` and ``sparsetir-hyb`` (the
best of each format), each with its configuration in ``variant``; where no candidate ran
correctly, ``sparsetir-tuned`` carries the first candidate's status and reason. Every
candidate's record is kept under ``<reference>/bundle-raw/`` (outside the tables' glob).
"""

from __future__ import annotations

import copy
import datetime
import sys
from pathlib import Path

from ...tune.database import TuningDatabase
from ..records import read_records, validate_record, write_json_atomic
from .manifest import is_candidate_name

SUMMARY_CONTENDERS = {"sparsetir-tuned": None, "sparsetir-csr": "csr", "sparsetir-hyb": "hyb"}


def record_files(folder) -> list[Path]:
    """The record files under ``folder``: ``records/*.json`` when present, else ``*.json`` (``run.json`` aside)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"records folder {folder} does not exist")
    files = sorted((folder / "records").glob("*.json")) if (folder / "records").is_dir() else sorted(
        path for path in folder.glob("*.json") if path.name != "run.json")
    if not files:
        raise ValueError(f"no record files in {folder} (expected records/<dataset>-feat<F>.json from the runner)")
    return files


def is_candidate(record: dict) -> bool:
    return is_candidate_name(record["contender"]) and isinstance(record.get("candidate"), dict)


def best_candidates(records: list[dict], format_family: str | None = None) -> dict:
    """(device, dataset, feat) -> the fastest ok candidate record (of ``format_family`` when given)."""
    best: dict = {}
    for record in records:
        if record["status"] != "ok" or not is_candidate(record):
            continue
        if format_family and record["candidate"]["config"]["format"].split(":")[0] != format_family:
            continue
        case = (record["device"], record["dataset"], record["feat"])
        if case not in best or record["stats"]["median"] < best[case]["stats"]["median"]:
            best[case] = record
    return best


def _cases_without_a_winner(records: list[dict], winners: dict) -> list[dict]:
    """The first candidate record of each case in which no candidate ran correctly."""
    first = {}
    for record in records:
        case = (record["device"], record["dataset"], record["feat"])
        if is_candidate(record) and case not in winners:
            first.setdefault(case, record)
    return list(first.values())


def _summary_record(record: dict, contender: str, ingested: str, source: Path) -> dict:
    summary = copy.deepcopy(record)
    summary["contender"] = contender
    summary.pop("candidate", None)
    summary["provenance"] = {**record["provenance"], "bundle_candidate": record["candidate"]["id"],
                             "ingested": ingested, "records_file": source.name}
    return summary


def ingest(records_dir, *, reference_dir="results/reference/gpu", database=None, progress: bool = True) -> list[dict]:
    """Add the best candidate of every case to the database and write the reference records; the added entries."""
    database = database if database is not None else TuningDatabase()
    reference_dir = Path(reference_dir)
    ingested = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    added = []
    files = record_files(records_dir)
    for path in files:
        records = read_records([path])
        for record in records:
            if is_candidate(record) and not isinstance(record["candidate"].get("tuning_key"), dict):
                raise ValueError(f"{path}: candidate record {record['contender']} has no tuning key")
        winners = best_candidates(records)
        merged = [r for r in records if not is_candidate_name(r["contender"])]
        for contender, family in SUMMARY_CONTENDERS.items():
            for record in best_candidates(records, family).values():
                merged.append(validate_record(_summary_record(record, contender, ingested, path)))
        for record in _cases_without_a_winner(records, winners):  # the tables say why
            merged.append(validate_record(_summary_record(record, "sparsetir-tuned", ingested, path)))
        for (device, dataset, feat), record in sorted(winners.items()):
            candidate = record["candidate"]
            measured = [{"config": r["candidate"]["config"], "median_s": r["stats"]["median"] if r["stats"] else None,
                         "status": r["status"]} for r in records
                        if is_candidate(r) and (r["device"], r["dataset"], r["feat"]) == (device, dataset, feat)]
            entry = database.add(candidate["tuning_key"], candidate["config"], median_s=record["stats"]["median"],
                                 source="bundle", device=record["provenance"].get("gpu") or device,
                                 bundle=record["provenance"].get("bundle", {}).get("id"), measurements=measured,
                                 trials=len(measured), dataset=dataset)
            added.append(entry)
            if progress:
                print(f"[bundle-ingest] {dataset} feat {feat} ({device}): best {candidate['config']} "
                      f"{record['stats']['median'] * 1e3:.4f} ms of {len(measured)} candidates", file=sys.stderr)
        if merged:
            write_json_atomic(reference_dir / f"bundle-{path.name}", merged)
        write_json_atomic(reference_dir / "bundle-raw" / path.name, records)
    if progress:
        print(f"[bundle-ingest] {len(added)} case(s) into {database.path}; {len(files)} record file(s) into "
              f"{reference_dir}", file=sys.stderr)
    return added
