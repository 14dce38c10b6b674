"""Set two runs side by side, case by case (``make compare``), judging only what was measured cleanly.

For every (experiment, case, contender) both runs have, the second run's speedup is compared with
the first's: their ratio, and whether it lies inside the first run's 90% interval. A case is
*contaminated* when either run's measurement of it was (``summary.json`` case rows carry
``contaminated``: the interference sentinel flagged more of its rounds than the repeat bound,
``sparsetir.timing.interference``); contaminated cases are listed apart and not counted. The
last line is

    agreement: N of M clean cases within the spread (K contaminated)

Cases only one run has are listed, not counted. Summaries written before the sentinel have no
``contaminated`` field; their cases count as clean.

    python -m sparsetir.bench.report.compare RUN_A RUN_B      # e.g. results/reference/cpu/workflow results
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .summary import interference_text, read_summary


def _summaries(folder: Path) -> dict[str, dict]:
    paths = sorted(Path(folder).glob("*/summary.json"))
    return {summary["experiment"]: summary for summary in (read_summary(path) for path in paths)}


def compare(reference: str | Path, fresh: str | Path) -> dict:
    """``{"rows", "contaminated", "within", "compared", "only_reference", "only_fresh", "interference"}``.

    ``rows``: the clean cases both runs have; ``contaminated``: the cases either run marks
    contaminated (the same fields, not judged); ``within`` of ``compared`` clean rows lie inside
    the first run's interval; ``interference``: per run, per experiment, the summary's account."""
    old, new = _summaries(Path(reference)), _summaries(Path(fresh))
    if not old:
        raise ValueError(f"{reference}: no <experiment>/summary.json (not a results folder)")
    if not new:
        raise ValueError(f"{fresh}: no <experiment>/summary.json (not a results folder)")
    rows, contaminated, only_reference, only_fresh = [], [], [], []
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
            dirty = [run for run, row in (("first", a), ("second", b)) if row.get("contaminated")]
            row = {"experiment": experiment, "case": key[0], "contender": key[1], "reference": a["speedup"],
                   "reference_low": low, "reference_high": high, "fresh": b["speedup"],
                   "ratio": b["speedup"] / a["speedup"], "within": inside, "contaminated_in": dirty}
            (contaminated if dirty else rows).append(row)
    order = lambda r: (r["experiment"], r["case"], r["contender"])  # noqa: E731
    rows.sort(key=order)
    contaminated.sort(key=order)
    interference = {"reference": {name: s.get("interference") for name, s in old.items()},
                    "fresh": {name: s.get("interference") for name, s in new.items()}}
    return {"rows": rows, "contaminated": contaminated, "within": sum(r["within"] for r in rows),
            "compared": len(rows), "only_reference": sorted(only_reference), "only_fresh": sorted(only_fresh),
            "interference": interference}


def summary_line(result: dict) -> str:
    """``agreement: N of M clean cases within the spread (K contaminated)``."""
    return (f"agreement: {result['within']} of {result['compared']} clean cases within the spread "
            f"({len(result['contaminated'])} contaminated)")


def _row_cells(r: dict) -> str:
    interval = (f"{r['reference']:.2f}× ({r['reference_low']:.2f}–{r['reference_high']:.2f})"
                if r["reference_low"] is not None else f"{r['reference']:.2f}×")
    return f"| {r['experiment']} | {r['case']} | {r['contender']} | {interval} | {r['fresh']:.2f}× | {r['ratio']:.2f} |"


def format_table(result: dict) -> str:
    header = "| experiment | case | contender | first run (90% interval) | second run | second / first |"
    lines = ["Clean cases (neither run contaminated):", "", header[:-1] + " within |", "|---|---|---|---|---|---|---|"]
    lines += [_row_cells(r) + f" {'yes' if r['within'] else 'NO'} |" for r in result["rows"]] or ["| (none) |"]
    if result["contaminated"]:
        lines += ["", f"Contaminated cases ({len(result['contaminated'])}; not judged): the interference sentinel "
                  "flagged more of their rounds than the repeat bound", "", header[:-1] + " contaminated in |",
                  "|---|---|---|---|---|---|---|"]
        lines += [_row_cells(r) + f" {' and '.join(r['contaminated_in'])} run |" for r in result["contaminated"]]
    for label, missing in (("only in the first run", result["only_reference"]),
                           ("only in the second run", result["only_fresh"])):
        if missing:
            lines.append(f"\n{len(missing)} cases {label}: " + "; ".join(" / ".join(m) for m in missing[:20])
                         + (" ..." if len(missing) > 20 else ""))
    lines += ["", "Interference (per experiment):"]
    for run, label in (("reference", "first"), ("fresh", "second")):
        for experiment, account in sorted(result["interference"][run].items()):
            lines.append(f"- {label} run, {experiment}: {interference_text(account)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.report.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reference", metavar="RUN_A",
                        help="the first results folder, whose intervals judge (e.g. results/reference/cpu/workflow)")
    parser.add_argument("fresh", metavar="RUN_B", help="the second results folder (e.g. results)")
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
