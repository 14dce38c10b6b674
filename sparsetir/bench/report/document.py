"""The report: ``report.md`` and ``report.html`` from every experiment's ``summary.json``.

At the top, the interference sentinel's account over every experiment (rounds clean, flagged,
repeated; contaminated cases). For each experiment (op or family): the headline table (geometric
mean with its interval over the baseline it is judged against, wins / ties / losses) with the
experiment's own account under it, the per-case table (with each case's flagged and run rounds,
CONTAMINATED where the flagged rounds passed the repeat bound), its figures with
the section's caption once (machine, threads, dtype, what 1× means, the timing method) and links to its full
tables. Then a **Pending** section, every row that could not run and why (no GPU, a dataset no
route provides, a baseline that is not installable, an experiment not implemented), and the
**Provenance** of the run (versions, CPU model and flags, threads, clock source, flush size,
config hash, git commit).

    python -m sparsetir.bench.report.document results/ --config-hash <sha> -o results/report
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from ..records import write_text_atomic
from .summary import caption_text, interference_text, read_summary, total_interference

CPU_FLAGS_OF_INTEREST = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
                         "avx512_fp16", "amx_tile")


def _interval_text(value, low, high) -> str:
    if value is None:
        return "n/a"
    if low is None or high is None:
        return f"{value:.2f}×"
    return f"{value:.2f}× ({low:.2f}–{high:.2f})"


def headline_rows(summary: dict) -> list[list[str]]:
    return [[row["contender"], str(row.get("device", "")), row["versus"],
             _interval_text(row["geomean"], row["low"], row["high"]),
             f"{row['wins']} / {row['ties']} / {row['losses']}", str(row["cases"])] for row in summary["headline"]]


HEADLINE_COLUMNS = ["contender", "device", "versus", "geomean speedup (90% interval)", "wins / ties / losses", "cases"]
CASE_COLUMNS = ["case", "contender", "versus", "speedup (90% interval)", "verdict", "rounds flagged / run"]
PENDING_COLUMNS = ["experiment", "case", "contender", "status", "reason"]


def _rounds_text(row: dict) -> str:
    if "rounds" not in row:
        return "not recorded"
    return f"{row['flagged']} / {row['rounds']}" + (" CONTAMINATED" if row.get("contaminated") else "")


def case_rows(summary: dict) -> list[list[str]]:
    return [[row["case"], row["contender"], row["versus"], _interval_text(row["speedup"], row["low"], row["high"]),
             row["verdict"], _rounds_text(row)] for row in summary["cases"]]


def pending_rows(summaries: list[dict], *, gpu_records: bool) -> list[list[str]]:
    rows = []
    for summary in summaries:
        for row in summary["pending"]:
            rows.append([summary["experiment"], row["case"], row["contender"], row["status"], row["reason"]])
        if not gpu_records and summary["headline"] + summary["cases"]:
            rows.append([summary["experiment"], "every case on cuda", "*", "pending",
                         "no GPU on this machine and no GPU records merged (results/reference/gpu/): build the GPU "
                         "bundle (snakemake gpu_bundle), run it on a GPU host, ingest its records"])
    return rows


def _markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return "(none)"

    def cell(text) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _html_table(columns: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def provenance(results: Path, config_hash: str | None) -> dict:
    """What the run was made on and with (read now, on the machine that renders the report)."""
    info = {"generated_by": "sparsetir.bench.report.document", "python": platform.python_version(),
            "platform": platform.platform(), "config_hash": config_hash or "?"}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                     platform.processor() or "?")
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
        info["cpu_model"] = model
        info["cpu_flags"] = " ".join(flag for flag in CPU_FLAGS_OF_INTEREST if flag in flags) or "(none of interest)"
    except OSError:
        info["cpu_model"] = platform.processor() or "?"
    try:
        info["usable_cores"] = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        info["usable_cores"] = os.cpu_count()
    try:
        info["clock_source"] = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().strip()
    except OSError:
        info["clock_source"] = "unknown"
    try:
        info["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                                            cwd=results if results.is_dir() else None).stdout.strip() or "?"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
        info["git_dirty"] = bool(dirty)
    except (OSError, subprocess.SubprocessError):
        info["git_commit"] = "?"
    return info


def _record_provenance(summaries: list[dict]) -> dict:
    for summary in summaries:
        caption = summary["caption"]
        if caption.get("versions"):
            return {"versions": caption["versions"], "threads": caption.get("threads"), "timing": caption.get("timing")}
    return {}


def render(results: Path, summaries: list[dict], *, config_hash: str | None = None,
           gpu_records: bool = False) -> tuple[str, str]:
    """``(markdown, html)`` of the report over ``summaries`` (paths relative to ``results``)."""
    sentinel = ("Interference over every experiment (the sentinel judges every round; a flagged round is dropped "
                f"for all contenders and repeated): {interference_text(total_interference(summaries))}.")
    md = ["# sparsetir results", "",
          "Speedups are ratios of median times with a 90% bootstrap interval over the interleaved rounds; a case "
          "whose interval straddles 1 is a tie, not a win.", "", sentinel, ""]
    body = ["<h1>sparsetir results</h1>",
            "<p>Speedups are ratios of median times with a 90% bootstrap interval over the interleaved rounds; a "
            "case whose interval straddles 1 is a tie, not a win.</p>", f"<p>{html.escape(sentinel)}</p>"]
    for summary in summaries:
        name = summary["experiment"]
        rounds = f"Interference: {interference_text(summary.get('interference'))}."
        md += [f"## {name}: {summary['title']}", "", "### Headline", "",
               _markdown_table(HEADLINE_COLUMNS, headline_rows(summary)), "", rounds, "", caption_text(summary), ""]
        body += [f"<h2 id='{html.escape(name)}'>{html.escape(name)}: {html.escape(summary['title'])}</h2>",
                 "<h3>Headline</h3>", _html_table(HEADLINE_COLUMNS, headline_rows(summary)),
                 f"<p>{html.escape(rounds)}</p>", f"<p class='caption'>{html.escape(caption_text(summary))}</p>"]
        for figure in summary["figures"]:
            path = f"{name}/{figure}"
            md += [f"![{name} {Path(figure).stem}]({path})", ""]  # the section's caption, above, holds for it
            svg = str(Path(path).with_suffix(".svg"))
            shown = svg if (results / svg).exists() else path
            body += [f"<figure><img src='{html.escape(shown)}' alt='{html.escape(Path(figure).stem)}'>"
                     f"<figcaption>{html.escape(Path(figure).stem)}</figcaption></figure>"]
        if summary["cases"]:
            md += ["### Per case", "", _markdown_table(CASE_COLUMNS, case_rows(summary)), ""]
            body += ["<h3>Per case</h3>", _html_table(CASE_COLUMNS, case_rows(summary))]
        links = [f"{name}/{table}" for table in summary["tables"]]
        if links:
            md += ["Full tables: " + ", ".join(f"[{link}]({link})" for link in links), ""]
            body += ["<p>Full tables: " + ", ".join(f"<a href='{html.escape(link)}'>{html.escape(link)}</a>"
                                                     for link in links) + "</p>"]
    pending = pending_rows(summaries, gpu_records=gpu_records)
    md += ["## Pending", "", "Every row that could not run, and why.", "", _markdown_table(PENDING_COLUMNS, pending), ""]
    body += ["<h2 id='pending'>Pending</h2><p>Every row that could not run, and why.</p>",
             _html_table(PENDING_COLUMNS, pending)]
    info = {**provenance(results, config_hash), **_record_provenance(summaries)}
    rows = [[key, json.dumps(value) if isinstance(value, (dict, list)) else str(value)] for key, value in info.items()]
    md += ["## Provenance", "", _markdown_table(["what", "value"], rows), ""]
    body += ["<h2 id='provenance'>Provenance</h2>", _html_table(["what", "value"], rows)]
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}table{border-collapse:collapse;"
             "margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}img{max-width:100%}"
             ".caption,figcaption{font-size:85%;color:#444}")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>sparsetir results</title><style>{style}</style>"
            f"</head><body>{''.join(body)}</body></html>\n")
    return "\n".join(md) + "\n", page


def write_report(results: str | Path, summary_paths: list, output: str | Path, *, config_hash: str | None = None,
                 gpu_records: bool = False) -> tuple[Path, Path]:
    """Read (and validate) the summaries, write ``<output>.md`` and ``<output>.html``."""
    results = Path(results)
    summaries = [read_summary(path) for path in summary_paths]
    markdown, page = render(results, summaries, config_hash=config_hash, gpu_records=gpu_records)
    output = Path(output)
    return (write_text_atomic(output.with_suffix(".md"), markdown),
            write_text_atomic(output.with_suffix(".html"), page))


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsetir.bench.report.document", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="the results folder (holds <experiment>/summary.json)")
    parser.add_argument("-o", "--output", help="the report path without suffix (default: <results>/report)")
    parser.add_argument("--config-hash", help="the hash of the config that made the results")
    args = parser.parse_args(argv)
    results = Path(args.results)
    paths = sorted(results.glob("*/summary.json"))
    if not paths:
        parser.error(f"no <experiment>/summary.json under {results}")
    gpu = any(row for path in paths for row in read_summary(path)["headline"] if row.get("device") == "cuda")
    md, page = write_report(results, paths, args.output or results / "report", config_hash=args.config_hash,
                            gpu_records=gpu)
    print(f"report: {md}  {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
