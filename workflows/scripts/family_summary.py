"""Workflow step: an op family's ``summary.json`` from its records (``sparsetir.bench.report.summary``).

Every sparsetir contender is judged against the best baseline of each case (the fastest, by
median, of the contenders whose names do not start with ``sparsetir``); a record may name its
case in a ``case`` field (a layer, a mask), else the case is (device, dataset, feature size).
"""

from pathlib import Path


def family_title(family: str) -> str:
    """The report's title of ``family``: its registered ``Family.title`` (the family name for an unregistered one)."""
    from sparsetir.bench.families import families

    declared = families().get(family)
    return declared.title if declared is not None else family


def case_key(record: dict) -> tuple:
    return (record.get("device"), record.get("case") or f"{record.get('dataset')} F={record.get('feat')}")


def case_label(key: tuple) -> str:
    return f"{key[1]} ({key[0]})"


def read_family_records(folder: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    """The valid records under ``folder/records``, and ``(file, why)`` for every one that is not
    (it becomes a failed row of the summary rather than stopping the report)."""
    import json

    from sparsetir.bench.records import validate_record

    records, invalid = [], []
    for file in sorted((folder / "records").glob("**/*.json")):
        try:
            document = json.loads(file.read_text())
        except (OSError, ValueError) as error:
            invalid.append((file.name, f"unreadable record file: {error}"))
            continue
        for record in document if isinstance(document, list) else [document]:
            try:
                records.append(validate_record(record))
            except ValueError as error:
                invalid.append((file.name, f"invalid record: {error}"))
    return records, invalid


def write_family_summary(results: Path, family: str, path: Path) -> dict:
    from sparsetir.bench.report.summary import pending_row, summary_from_records, write_summary

    folder = results / family
    records, invalid = read_family_records(folder)
    # a family's training experiment (<family>/training/) is linked beside its own tables and figures
    figures = sorted(str(p.relative_to(folder)) for p in [*(folder / "figures").glob("*.png"),
                                                          *(folder / "training" / "figures").glob("*.png")])
    tables = [name for name in ("speedup.md", "speedup.csv", "training/speedup.md", "training/speedup.csv")
              if (folder / name).exists()]
    summary = summary_from_records([r for r in records if r.get("experiment") == family], family,
                                   family_title(family), case_key=case_key, case_label=case_label,
                                   tables=tables, figures=figures)
    summary["pending"] += [pending_row(file, "*", "failed", why) for file, why in invalid]
    write_summary(path, summary)
    return summary


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        write_family_summary(Path(snakemake.params.results), snakemake.wildcards.family, Path(snakemake.output[0]))
