"""An experiment's summary (``results/<experiment>/summary.json``): what the report, the
end-of-run screen and ``compare`` read, whatever the experiment.

Every experiment's tables step writes one (:func:`write_summary`), with

``headline``  per contender: its geometric-mean speedup over the baseline it is judged against,
              with the bootstrap interval, and the wins / ties / losses over its cases;
``cases``     per (case, contender): the speedup, its interval and verdict;
``pending``   every row that could not run (unavailable, failed, wrong, not implemented), with
              its reason;
``tables``, ``figures``   paths relative to the experiment folder;
``caption``   machine, threads, dtype, what 1× means, the timing method;
``interference``   the interference sentinel's account over the experiment's timed cases
              (``sparsetir.timing.interference``): ``{"rounds": R, "flagged": F, "repeated": P,
              "contaminated_cases": C, "cases": N, "judged": J}``, rounds summed over every
              measurement (the contenders of a case share their rounds), C of N cases whose
              measurement had more flagged rounds than its repeat bound, J of N measured with the
              sentinel on. Each case row carries ``contaminated`` and its own ``rounds`` /
              ``flagged`` / ``repeated``.

:func:`read_summary` validates a file before anything uses it (it may have been edited or cut
short), raising ``ValueError`` naming the first problem.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..records import write_json_atomic
from .intervals import Interval, verdict_counts

SCHEMA = "sparsetir.bench.summary/1"
PENDING_STATUSES = ("unavailable", "failed", "wrong", "pending")


def _number(value) -> float | None:
    return None if value is None or not math.isfinite(float(value)) else float(value)


def headline_row(contender: str, versus: str, geomean: Interval, case_intervals, **extra) -> dict:
    """One headline entry: geomean with interval, and the verdicts of the cases it summarises."""
    counts = verdict_counts(case_intervals)
    return {"contender": contender, "versus": versus, "geomean": _number(geomean.value),
            "low": _number(geomean.low), "high": _number(geomean.high), "wins": counts["win"],
            "ties": counts["tie"], "losses": counts["loss"], "cases": len(case_intervals), **extra}


def case_row(case: str, contender: str, versus: str, interval: Interval, **extra) -> dict:
    return {"case": case, "contender": contender, "versus": versus, "speedup": _number(interval.value),
            "low": _number(interval.low), "high": _number(interval.high), "verdict": interval.verdict, **extra}


def pending_row(case: str, contender: str, status: str, reason: str) -> dict:
    return {"case": case, "contender": contender, "status": status, "reason": reason or "(no reason recorded)"}


INTERFERENCE_KEYS = ("rounds", "flagged", "repeated", "contaminated_cases", "cases", "judged")


def case_interference(records) -> dict:
    """One case's sentinel account from its timed records (``stats["interference"]``): the
    distinct measurements among them (contenders timed together share one) summed, contaminated
    when any of them was; ``judged`` when every one was measured with the sentinel on."""
    accounts = {}
    for record in records:
        account = (record.get("stats") or {}).get("interference")
        if isinstance(account, dict):
            accounts[json.dumps(account, sort_keys=True, default=str)] = account
    total = {key: sum(int(a.get(key) or 0) for a in accounts.values()) for key in ("rounds", "flagged", "repeated")}
    return {**total, "contaminated": any(bool(a.get("contaminated")) for a in accounts.values()),
            "judged": bool(accounts) and all(bool(a.get("judged")) for a in accounts.values())}


def experiment_interference(per_case: list[dict]) -> dict:
    """The experiment's ``interference`` entry from its cases' :func:`case_interference`."""
    return {"rounds": sum(c["rounds"] for c in per_case), "flagged": sum(c["flagged"] for c in per_case),
            "repeated": sum(c["repeated"] for c in per_case),
            "contaminated_cases": sum(bool(c["contaminated"]) for c in per_case), "cases": len(per_case),
            "judged": sum(bool(c["judged"]) for c in per_case)}


def records_interference(records) -> dict:
    """An experiment's ``interference`` entry straight from its records, a case being (device,
    ``case`` or dataset, feature size): for tables written before the summary."""
    by_case: dict = {}
    for record in records:
        if record.get("status") == "ok":
            key = (record.get("device"), record.get("case") or record.get("dataset"), record.get("feat"))
            by_case.setdefault(key, []).append(record)
    return experiment_interference([case_interference(rows) for rows in by_case.values()])


def interference_paragraph(records) -> str:
    """The Markdown paragraph each experiment's ``speedup.md`` ends with: its rounds and contaminated cases."""
    return (f"\nInterference (the sentinel judges every round; a flagged round is dropped for every contender and "
            f"repeated; a contaminated case had more flagged rounds than the repeat bound): "
            f"{interference_text(records_interference(records))}.\n")


def total_interference(summaries) -> dict | None:
    """The accounts of several experiments added up (None when none has one)."""
    accounts = [s["interference"] for s in summaries if s.get("interference")]
    if not accounts:
        return None
    return {key: sum(a[key] for a in accounts) for key in INTERFERENCE_KEYS}


def interference_text(interference: dict | None) -> str:
    """The account in words, for tables and screens: rounds clean / flagged / repeated, contaminated cases."""
    if not interference:
        return "rounds: not recorded (made before the interference sentinel)"
    if interference["cases"] and not interference["judged"]:
        return (f"rounds: {interference['rounds']} run, none judged ({interference['cases']} cases timed without "
                "the sentinel, or recorded before it)")
    rounds, flagged = interference["rounds"], interference["flagged"]
    share = f" ({100 * flagged / rounds:.1f}%)" if rounds else ""
    text = (f"rounds: {rounds - flagged} clean, {flagged} flagged{share}, {interference['repeated']} repeated; "
            f"{interference['contaminated_cases']} of {interference['cases']} cases contaminated")
    unjudged = interference["cases"] - interference["judged"]
    return text + (f" ({unjudged} timed without the sentinel)" if unjudged > 0 else "")


def make_summary(experiment: str, title: str, *, headline: list, cases: list, pending: list, tables: list,
                 figures: list, caption: dict, stage_seconds: dict | None = None,
                 interference: dict | None = None) -> dict:
    summary = {"schema": SCHEMA, "experiment": experiment, "title": title, "headline": headline, "cases": cases,
               "pending": pending, "tables": [str(t) for t in tables], "figures": [str(f) for f in figures],
               "caption": caption, "stage_seconds": stage_seconds or {},
               "interference": interference or experiment_interference([])}
    validate_summary(summary)
    return summary


def validate_summary(summary) -> None:
    """``ValueError`` naming the first thing wrong with a summary object."""
    if not isinstance(summary, dict) or summary.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} object")
    for key, kind in (("experiment", str), ("title", str), ("headline", list), ("cases", list), ("pending", list),
                      ("tables", list), ("figures", list), ("caption", dict)):
        if not isinstance(summary.get(key), kind):
            raise ValueError(f"summary field {key!r} must be a {kind.__name__}")
    for row in summary["headline"]:
        for key in ("contender", "versus", "wins", "ties", "losses", "cases"):
            if key not in row:
                raise ValueError(f"a headline row has no {key!r}: {row}")
        if row["geomean"] is not None and row["low"] is not None and not row["low"] <= row["geomean"] <= row["high"]:
            raise ValueError(f"headline {row['contender']}: the interval does not hold the geomean")
    for row in summary["cases"]:
        if not {"case", "contender", "speedup", "low", "high", "verdict"} <= set(row):
            raise ValueError(f"a case row lacks fields: {row}")
    for row in summary["pending"]:
        if not row.get("reason") or row.get("status") not in PENDING_STATUSES:
            raise ValueError(f"a pending row needs a status in {PENDING_STATUSES} and a reason: {row}")
    if "interference" in summary:  # absent only in summaries written before the sentinel
        interference = summary["interference"]
        if not isinstance(interference, dict):
            raise ValueError("summary field 'interference' must be a dict")
        for key in INTERFERENCE_KEYS:
            value = interference.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"interference.{key} must be an int >= 0, got {value!r}")
        if interference["flagged"] > interference["rounds"] or interference["contaminated_cases"] > interference["cases"]:
            raise ValueError(f"interference: more flagged rounds or contaminated cases than there are: {interference}")


def write_summary(path: str | Path, summary: dict) -> Path:
    validate_summary(summary)
    return write_json_atomic(path, summary)


def read_summary(path: str | Path) -> dict:
    """A summary file, validated (``ValueError`` naming the file and the problem)."""
    path = Path(path)
    try:
        summary = json.loads(path.read_text())
        validate_summary(summary)
    except (OSError, json.JSONDecodeError, ValueError) as error:
        raise ValueError(f"{path}: not a valid experiment summary: {error}") from None
    return summary


def worker_groups(reference_stats: dict, contender_stats: dict) -> list[int] | None:
    """The rounds per worker process when both stats come from the same worker processes (the
    records of ``sparsetir.bench.workers``): the two-level bootstrap of ``intervals``; else None."""
    groups = [[int(p["n"]) for p in (stats.get("processes") or [])] for stats in (reference_stats, contender_stats)]
    return groups[0] if len(groups[0]) > 1 and groups[0] == groups[1] else None


def default_case_key(record: dict) -> tuple:
    return (record.get("device"), record.get("dataset"), record.get("feat"))


def default_case_label(key: tuple) -> str:
    device, dataset, feat = key
    return f"{dataset} F={feat} ({device})"


def caption_from_records(records: list[dict], versus: str) -> dict:
    """Machine, threads, dtype, what 1× means and the timing method, from the records' provenance."""
    timed = [r for r in records if r.get("status") == "ok"] or records
    provenance = next((r["provenance"] for r in timed if r.get("provenance")), {})
    timing = provenance.get("timing") or {}
    counts = sorted({(r.get("stats") or {}).get("n") for r in timed} - {None})
    if timing.get("samples") is not None:
        bounds = [f"at least {timing['min_samples']}" if timing.get("min_samples") is not None else None,
                  f"at most {timing['max_time_s']} s" if timing.get("max_time_s") is not None else None]
        bounds = ", ".join(b for b in bounds if b)
        rounds = f"median of {timing['samples']} interleaved rounds" + (f" ({bounds})" if bounds else "")
    else:  # timed by its own loop (e.g. training epochs), or no policy recorded: the records' sample counts
        rounds = (f"median of {counts[0]}" if len(counts) == 1 else
                  f"median of {counts[0]}-{counts[-1]}" if counts else "median of the") + " interleaved rounds"
    method = (rounds + ", "
              + ("a cache flush before every call" if provenance.get("flush") else "no cache flush")
              + f", {provenance.get('timer', 'perf_counter')}; intervals: 90% bootstrap over the rounds")
    threads = provenance.get("threads") or (provenance.get("env") or {}).get("TVM_NUM_THREADS") or \
        provenance.get("torch_threads") or provenance.get("usable_cpus")
    machine = ", ".join(part for part in (provenance.get("cpu_model"), f"{provenance['usable_cpus']} usable cores"
                                          if provenance.get("usable_cpus") else None) if part)
    return {"machine": machine or None,
            "threads": threads, "dtype": timed[0].get("dtype", "float32") if timed else "float32",
            "one_x": f"the median time of {versus}", "timing": method,
            "versions": provenance.get("versions", {}), "host": provenance.get("host")}


def caption_text(summary: dict) -> str:
    """The caption in words (machine, threads, dtype, what 1× is, the timing method); a field the records
    did not carry is left out rather than shown as ``?``."""
    caption = summary["caption"]
    parts = [f"{label}: {caption[key]}" for key, label in (("machine", "Machine"), ("threads", "threads"),
                                                            ("dtype", "dtype")) if caption.get(key) not in (None, "")]
    text = "; ".join(parts) + "." if parts else ""
    if caption.get("one_x"):
        text += f" 1× is {caption['one_x']}."
    if caption.get("timing"):
        text += f" Timing: {caption['timing']}."
    return text.strip()


def summary_from_records(records: list[dict], experiment: str, title: str, *, judged: str = "sparsetir",
                         reference: dict | None = None, libraries=None, case_key=default_case_key,
                         case_label=default_case_label, tables=(), figures=()) -> dict:
    """The summary of an experiment from its records (``bench.records``).

    The first element of a case key is its device: the headline has one row per judged contender
    and device. ``judged``: the prefix of the contenders the headline is about. ``reference``: per device, a
    contender name, or ``None``/``"best"`` for the fastest (by median) of ``libraries`` in each
    case (default: every contender not starting with ``judged``). A later record of the same
    (case, contender) replaces an earlier one.
    """
    from .intervals import geomean_interval, ratio_interval  # noqa: PLC0415 - numpy-heavy, only here

    latest: dict = {}
    for record in records:
        latest[(case_key(record), record.get("contender"))] = record
    by_case: dict = {}
    for (key, contender), record in latest.items():
        by_case.setdefault(key, {})[contender] = record
    pending, cases, per_contender, accounts = [], [], {}, []
    for key, contenders in by_case.items():
        label = case_label(key)
        for contender, record in contenders.items():
            if record.get("status") != "ok":
                pending.append(pending_row(label, contender, record.get("status", "failed"), record.get("reason")))
        timed = {c: r for c, r in contenders.items() if r.get("status") == "ok" and (r.get("stats") or {}).get("samples")}
        account = case_interference(timed.values())
        if timed:
            accounts.append(account)
        judged_by = {"contaminated": account["contaminated"],
                     **{k: account[k] for k in ("rounds", "flagged", "repeated")}}
        wanted = (reference or {}).get(key[0]) if isinstance(key, tuple) else None
        if wanted and wanted != "best":
            versus = wanted if wanted in timed else None
        else:
            pool = [c for c in timed if (c in libraries if libraries is not None else not str(c).startswith(judged))]
            versus = min(pool, key=lambda c: timed[c]["stats"]["median"]) if pool else None
        for contender, record in timed.items():
            if not str(contender).startswith(judged):
                continue
            if versus is None:
                cases.append(case_row(label, contender, "n/a", ratio_interval(None, None), **judged_by))
                continue
            pair = (timed[versus]["stats"]["samples"], record["stats"]["samples"],
                    worker_groups(timed[versus]["stats"], record["stats"]))
            interval = ratio_interval(*pair[:2], groups=pair[2])
            cases.append(case_row(label, contender, versus, interval, **judged_by))
            per_contender.setdefault((contender, key[0]), []).append((pair, interval))
    headline = [headline_row(contender, _versus(reference, libraries, judged, device),
                             geomean_interval([pair for pair, _ in rows]),
                             [interval for _, interval in rows], device=device)
                for (contender, device), rows in per_contender.items()]
    devices = sorted({str(device) for _, device in per_contender}) or [None]
    description = "; ".join(_versus(reference, libraries, judged, device) for device in devices)
    return make_summary(experiment, title, headline=headline, cases=cases, pending=pending, tables=list(tables),
                        figures=list(figures), caption=caption_from_records(list(latest.values()), description),
                        interference=experiment_interference(accounts))


def _versus(reference: dict | None, libraries, judged: str, device) -> str:
    """What a device's speedups are over, in words."""
    wanted = (reference or {}).get(device)
    if wanted and wanted != "best":
        return wanted
    if libraries is not None:
        return f"the best of {len(libraries)} libraries per case"
    return "the best baseline per case"
