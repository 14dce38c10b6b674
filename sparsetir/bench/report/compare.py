"""Set a fresh run beside a reference run, case by case (``make compare``).

For every (experiment, case, contender) both runs have, the fresh speedup is compared with the
reference's: their ratio, and whether the fresh median lies inside the reference's 90% interval.
The last line says how many cases agree ("34 of 40 cases within the spread"); cases only one run
has are listed, not counted.

    python -m sparsetir.bench.report.compare results/reference/cpu/workflow results
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .summary import read_summary


def _summaries(folder: Path) -> dict[str, dict]:
    paths = sorted(Path(folder).glob("*/summary.json"))
    return {summary["experiment"]: summary for summary in (read_summary(path) for path in paths)}


def compare(reference: str | Path, fresh: str | Path) -> dict:
    """``{"rows": [...], "within": int, "compared": int, "only_reference": [...], "only_fresh": [...]}``."""
    old, new = _summaries(Path(reference)), _summaries(Path(fresh))
    if not old:
        raise ValueError(f"{reference}: no <experiment>/summary.json (not a results folder)")
    if not new:
        raise ValueError(f"{fresh}: no <experiment>/summary.json (not a results folder)")
    rows, only_reference, only_fresh = [], [], []
    for experiment in sorted(set(old) | set(new)):
        before = {(c["case"], c["contender"]): c for c in old.get(experiment, {}).get("cases", [])
                  if c["speedup"] is not None}
        after = {(c["case"], c["contender"]): c for c in new.get(experiment, {}).get("cases", [])
                 if c["speedup"] is not None}
        only_reference += [(experiment, *key) for key in before.keys() - after.keys()]
        only_fresh += [(experiment, *key) for key in after.keys() - before.keys()]
        for key in before.keys() & after.keys():
            a, b = before[key], after[key]
            low, high = a["low"], a["high"]
            inside = low is not None and high is not None and low <= b["speedup"] <= high
            rows.append({"experiment": experiment, "case": key[0], "contender": key[1], "reference": a["speedup"],
                         "reference_low": low, "reference_high": high, "fresh": b["speedup"],
                         "ratio": b["speedup"] / a["speedup"], "within": inside})
    rows.sort(key=lambda r: (r["experiment"], r["case"], r["contender"]))
    return {"rows": rows, "within": sum(r["within"] for r in rows), "compared": len(rows),
            "only_reference": sorted(only_reference), "only_fresh": sorted(only_fresh)}


def summary_line(result: dict) -> str:
    if result["compared"] and result["within"] == result["compared"]:
        return f"all {result['compared']} cases within the spread"
    return f"{result['within']} of {result['compared']} cases within the spread"


def format_table(result: dict) -> str:
    lines = ["| experiment | case | contender | reference (90% interval) | fresh | fresh / reference | within |",
             "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        interval = (f"{r['reference']:.2f}× ({r['reference_low']:.2f}–{r['reference_high']:.2f})"
                    if r["reference_low"] is not None else f"{r['reference']:.2f}×")
        lines.append(f"| {r['experiment']} | {r['case']} | {r['contender']} | {interval} | {r['fresh']:.2f}× | "
                     f"{r['ratio']:.2f} | {'yes' if r['within'] else 'NO'} |")
    for label, missing in (("only in the reference", result["only_reference"]), ("only in the fresh run",
                                                                                result["only_fresh"])):
        if missing:
            lines.append(f"\n{len(missing)} cases {label}: " + "; ".join(" / ".join(m) for m in missing[:20])
                         + (" ..." if len(missing) > 20 else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.report.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reference", help="the reference results folder (e.g. results/reference/cpu/workflow)")
    parser.add_argument("fresh", help="the fresh results folder (e.g. results)")
    parser.add_argument("-o", "--output", help="also write the table and the summary line to this Markdown file")
    args = parser.parse_args(argv)
    try:
        result = compare(args.reference, args.fresh)
    except ValueError as error:
        parser.error(str(error))
    text = format_table(result) + "\n\n" + summary_line(result) + "\n"
    print(text, end="")
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
