"""The screen a workflow run ends with: what came out, what did not, how long each stage took.

- per experiment: the headline geomeans with their intervals (and wins / ties / losses);
- the interference sentinel's account: the share of flagged rounds over the run, then per
  experiment rounds clean / flagged / repeated and contaminated cases;
- counts of failed, wrong, unavailable and pending rows, each with its first reason;
- every dataset the run could not get, grouped by reason (``data_lines``: the pre-flight survey
  ``<results>/data_availability.json``, with what the downloads brought);
- elapsed time per stage: data, compile, tune, time, render (from the rules' snakemake
  ``benchmark:`` files under ``<results>/benchmarks/<rule>/``, and the compile seconds the
  records carry, which are part of their timing jobs);
- where the report and the tables are.

    python -m sparsetir.bench.report.endrun results
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from ...data.availability import SURVEY_FILE, format_groups, missing_at_end
from .summary import interference_text, read_summary, total_interference

STAGES = ("data", "compile", "tune", "time", "render")


def stage_of(rule: str) -> str | None:
    """The stage a rule's time counts towards (None: not counted)."""
    if rule == "prepare_dataset":
        return "data"
    if rule.startswith("tune"):
        return "tune"
    if rule.endswith("_case") or rule in ("run_case",):
        return "time"
    if rule.endswith(("tables", "figures", "summary")) or rule == "report":
        return "render"
    return None


def stage_seconds(results: Path) -> dict[str, float]:
    """Seconds per stage from the benchmark files, with the records' compile time moved out of "time"."""
    seconds = dict.fromkeys(STAGES, 0.0)
    for path in (results / "benchmarks").glob("*/**/*.tsv"):
        rule = path.relative_to(results / "benchmarks").parts[0]
        stage = stage_of(rule)
        if stage is None:
            continue
        try:
            with path.open() as handle:
                rows = list(csv.DictReader(handle, delimiter="\t"))
            seconds[stage] += sum(float(row["s"]) for row in rows)
        except (OSError, KeyError, ValueError):  # a benchmark file cut short: not counted
            continue
    compile_s = 0.0
    for path in results.glob("*/records/**/*.json"):
        try:
            document = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        for record in document if isinstance(document, list) else [document]:
            if isinstance(record, dict):
                value = (record.get("times") or {}).get("compile_s")
                compile_s += float(value) if isinstance(value, (int, float)) else 0.0
    seconds["compile"] = compile_s
    seconds["time"] = max(seconds["time"] - compile_s, 0.0)
    return seconds


def data_lines(results: Path) -> list[str]:
    """Every dataset the run could not get, one line per reason (from the pre-flight survey)."""
    path = results / SURVEY_FILE
    if not path.is_file():
        return [f"Data it could not get: not known ({path} is missing: the run did not start, or predates it)"]
    try:
        missing = missing_at_end(path)
    except ValueError as error:
        return [f"Data it could not get: not known ({error})"]
    if not missing:
        return ["Data it could not get: nothing"]
    return [f"Data it could not get ({len(missing)} datasets; their rows say unavailable):", *format_groups(missing)]


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes}:{rest:02d}"


def screen(results: str | Path) -> str:
    results = Path(results)
    paths = sorted(results.glob("*/summary.json"))
    lines = [f"=== sparsetir: results in {results}/ ==="]
    counts: dict[str, list] = {}
    summaries = []
    for path in paths:
        try:
            summary = read_summary(path)
        except ValueError as error:
            lines.append(f"  {path.parent.name}: unreadable summary ({error})")
            continue
        summaries.append(summary)
        for row in summary["headline"]:
            value = "n/a" if row["geomean"] is None else (
                f"{row['geomean']:.2f}×" + (f" ({row['low']:.2f}–{row['high']:.2f})" if row["low"] is not None else ""))
            lines.append(f"  {summary['experiment']:<10} {row['contender']:<22} {row.get('device', ''):<5} {value:<22} "
                         f"vs {row['versus']}; {row['wins']} wins, {row['ties']} ties, {row['losses']} losses "
                         f"of {row['cases']}")
        if not summary["headline"]:
            lines.append(f"  {summary['experiment']:<10} (no timed sparsetir contender)")
        for row in summary["pending"]:
            counts.setdefault(row["status"], []).append(f"{summary['experiment']} {row['case']} {row['contender']}: "
                                                        f"{row['reason']}")
    if not paths:
        lines.append("  no experiment summaries (did the run finish?)")
    total = total_interference(summaries)
    if total and total["rounds"]:
        lines.append(f"Interference: {100 * total['flagged'] / total['rounds']:.1f}% of rounds flagged "
                     f"({interference_text(total)})")
    else:
        lines.append("Interference: " + ("no rounds timed" if total else "not recorded (made before the sentinel)"))
    for summary in summaries:
        if summary.get("interference") and summary["interference"]["rounds"]:
            lines.append(f"  {summary['experiment']:<10} {interference_text(summary['interference'])}")
    lines.append("Did not run:" if counts else "Did not run: nothing")
    for status in ("failed", "wrong", "unavailable", "pending"):
        if status in counts:
            lines.append(f"  {len(counts[status]):>4} {status:<11} first: {counts[status][0][:160]}")
    lines += data_lines(results)
    seconds = stage_seconds(results)
    lines.append("Elapsed: " + ", ".join(f"{stage} {_clock(seconds[stage])}" for stage in STAGES)
                 + f" (total {_clock(sum(seconds.values()))})")
    report = results / "report.html"
    lines.append(f"Report: {report}{'' if report.exists() else ' (not written)'}   "
                 f"Tables: {results}/<experiment>/speedup.md   Figures: {results}/<experiment>/figures/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.report.endrun", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="?", default="results", help="the results folder (default: results)")
    args = parser.parse_args(argv)
    print(screen(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
