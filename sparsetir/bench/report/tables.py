"""One speedup path for every experiment family: ratios of medians, their intervals, verdicts, headline.

A family's long table (``speedup.csv``) is one row per (case, contender); :func:`add_speedups` adds,
per row,

- ``<versus>`` / ``<versus>_ms`` / ``<versus>_mean_ms``: the contender each speedup is over (the
  fastest timed reference of the case, by median) and its times;
- ``<column>`` (> 1: faster than that reference) and ``<column>_mean`` (from the means);
- ``<column>_low`` / ``<column>_high``: the 90% bootstrap interval of the ratio of medians over the
  interleaved rounds (``intervals.ratio_interval``), and ``<column>_verdict``: ``win`` (the interval
  lies above 1), ``loss`` (below), ``tie`` (it straddles 1) or ``n/a``.

:func:`ratio_columns` does the same over a reference a family names (e.g. SDPA with the dense mask),
:func:`headline_table` gives per sparsetir contender the geometric mean with its interval and the
wins / ties / losses, :func:`speedup_cell` the cell text ``1.56× (1.41–1.70)`` (`` tie`` where the
interval straddles 1). Every family's tables (``report.families``), the training families' and
spmm/sddmm's (``workflows/scripts/speedup_tables.py``) use them. A family's long table starts from
:func:`timing_fields` per record (who ran and how long) plus its own case columns, made a frame by
:func:`long_frame`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .intervals import NAN, Interval, geomean, geomean_interval, number_cell, ratio_interval, rounds_of, verdict_counts

SPARSETIR = "sparsetir"
ALL = "*"  # the contender of a record that stands for a whole case that could not run
SPEEDUP = "speedup_vs_best_baseline"


#: The numeric columns :func:`timing_fields` gives every row (ms, seconds, sample counts).
TIMING_COLUMNS = ("median_ms", "p20_ms", "p80_ms", "mean_ms", "samples", "convert_ms", "compile_s", "tune_s")


def timing_fields(record: Mapping) -> dict:
    """The columns every family's long table takes from a record alike: ``contender``, ``variant``,
    ``status``, ``reason``; ``median_ms``, ``p20_ms``, ``p80_ms``, ``mean_ms`` (None where not timed);
    ``samples`` and ``samples_s`` (the interleaved rounds, ``intervals.rounds_of``); ``convert_ms``,
    ``compile_s``, ``tune_s`` (the preparation, None where not measured)."""
    stats, times = record.get("stats") or {}, record.get("times") or {}
    return {"contender": record["contender"], "variant": record.get("variant"), "status": record["status"],
            "reason": record.get("reason"),
            **{f"{key}_ms": stats[key] * 1e3 if key in stats else None for key in ("median", "p20", "p80", "mean")},
            "samples": stats.get("n"), "samples_s": rounds_of(stats),
            "convert_ms": times["convert_s"] * 1e3 if times.get("convert_s") is not None else None,
            "compile_s": times.get("compile_s"), "tune_s": times.get("tune_s")}


def long_frame(rows: Sequence[dict], case: Sequence[str], numeric: Sequence[str] = (), *, what: str) -> pd.DataFrame:
    """The rows (:func:`timing_fields` and a family's case columns) as a frame: a later row of a
    (``case``..., contender) wins; :data:`TIMING_COLUMNS` and ``numeric`` as floats (NaN where missing).
    ``ValueError`` naming ``what`` when there are no rows."""
    if not rows:
        raise ValueError(f"no {what} records to aggregate")
    frame = pd.DataFrame(rows).drop_duplicates(subset=[*case, "contender"], keep="last").reset_index(drop=True)
    for column in (*TIMING_COLUMNS, *numeric):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    return frame


def _key(values) -> tuple:
    return tuple("" if isinstance(v, float) and math.isnan(v) else v for v in values)


def best_of(frame: pd.DataFrame, case: Sequence[str], pool: pd.Series, versus: str = "best_baseline",
            time: str = "median_ms") -> pd.DataFrame:
    """Per case, the fastest (by ``time``) timed row among ``pool``: ``versus``, ``<versus>_ms`` and, where the
    frame has means, ``<versus>_mean_ms``."""
    timed = frame[pool & (frame["status"] == "ok") & frame[time].notna()]
    means = ["mean_ms"] if "mean_ms" in frame else []
    renamed = {"contender": versus, time: f"{versus}_ms", **({"mean_ms": f"{versus}_mean_ms"} if means else {})}
    if timed.empty:
        return pd.DataFrame({c: pd.Series(dtype=frame[c].dtype if c in frame else float)
                             for c in [*case, *renamed.values()]})
    best = timed.loc[timed.groupby(list(case), sort=False, dropna=False)[time].idxmin(),
                     [*case, "contender", time, *means]]
    return best.rename(columns=renamed)


def speedups_over_best(frame: pd.DataFrame, case: Sequence[str], pool: pd.Series, time: str,
                       column: str = SPEEDUP, versus: str = "best_baseline") -> pd.DataFrame:
    """Each timed row's ``time`` speedup over the fastest of ``pool`` in its case (``versus``, ``<versus>_ms``,
    ``column``; none for a row that did not run), with its interval and verdict (:func:`ratio_columns`)."""
    frame = frame.merge(best_of(frame, case, pool, versus, time), on=list(case), how="left")
    failed = frame["status"] != "ok"
    frame[versus] = frame[versus].where(~failed, None)
    frame[f"{versus}_ms"] = pd.to_numeric(frame[f"{versus}_ms"], errors="coerce").where(~failed)
    ratio_columns(frame, case, frame[versus], frame[f"{versus}_ms"] / frame[time], column)
    return frame


def samples_by_case(frame: pd.DataFrame, case: Sequence[str]) -> dict:
    """``(case..., contender) -> timing samples`` of the timed rows."""
    timed = frame[frame["status"] == "ok"]
    return {(*_key(row[:-2]), row[-2]): row[-1]
            for row in timed[[*case, "contender", "samples_s"]].itertuples(index=False)}


def ratio_columns(frame: pd.DataFrame, case: Sequence[str], against: pd.Series, value: pd.Series, column: str,
                  samples: dict | None = None) -> None:
    """``column`` (= ``value``), ``_low``, ``_high`` and ``_verdict`` of every row over the contender ``against``
    names (the interval from both rows' samples; held to contain the value)."""
    samples = samples_by_case(frame, case) if samples is None else samples
    intervals = []
    for (_, row), reference, point in zip(frame.iterrows(), against, value):
        if row["status"] != "ok" or not isinstance(reference, str) or not np.isfinite(point):
            intervals.append(NAN if not np.isfinite(point) else Interval(float(point), math.nan, math.nan))
            continue
        found = ratio_interval(samples.get((*_key(row[list(case)]), reference)), row["samples_s"])
        low, high = found.low, found.high
        if math.isfinite(low) and math.isfinite(high):
            low, high = min(low, point), max(high, point)
        intervals.append(Interval(float(point), low, high))
    frame[column] = [i.value for i in intervals]
    frame[f"{column}_low"] = [i.low for i in intervals]
    frame[f"{column}_high"] = [i.high for i in intervals]
    frame[f"{column}_verdict"] = [i.verdict for i in intervals]


def add_speedups(frame: pd.DataFrame, case: Sequence[str], pool: pd.Series | None = None, *,
                 versus: str = "best_baseline", column: str = SPEEDUP) -> pd.DataFrame:
    """Each row's speedup over the fastest timed row of ``pool`` (default: the baselines) in its case, with
    the mean-based ratio, the interval and the verdict (the module docstring)."""
    pool = frame["kind"] == "baseline" if pool is None else pool
    frame = frame.merge(best_of(frame, case, pool, versus), on=list(case), how="left")
    reference_ms = pd.to_numeric(frame[f"{versus}_ms"], errors="coerce")
    frame[f"{versus}_ms"] = reference_ms
    frame[f"{versus}_mean_ms"] = pd.to_numeric(frame[f"{versus}_mean_ms"], errors="coerce")
    ratio_columns(frame, case, frame[versus], reference_ms / frame["median_ms"], column)
    frame[f"{column}_mean"] = frame[f"{versus}_mean_ms"] / frame["mean_ms"]
    return frame


def row_interval(row, column: str = SPEEDUP) -> Interval:
    return Interval(row[column], row[f"{column}_low"], row[f"{column}_high"])


def speedup_cell(interval: Interval, status: str = "ok") -> str:
    """``1.56× (1.41–1.70)`` with `` tie`` where the interval straddles 1; the status where it did not run;
    ``n/a`` where it ran but its case has no reference time."""
    if status != "ok":
        return status
    if not np.isfinite(interval.value):
        return "n/a"
    return interval.text() + (" tie" if interval.verdict == "tie" else "")


def speedup_cells(row) -> dict:
    """A sparsetir row's cells in a family's speedup table, against the best baseline of its case: its ms,
    the baseline and its ms, the speedup of medians with its interval (:func:`speedup_cell`), the verdict,
    the speedup of means, and % of the measured FMA rate and of the memory bound (``pct_fma``,
    ``pct_memory_bound``)."""
    return {"sparsetir ms": number_cell(row["median_ms"], 3),
            "best baseline": row["best_baseline"] if isinstance(row["best_baseline"], str) else "—",
            "baseline ms": number_cell(row["best_baseline_ms"], 3),
            "speedup (median, 90% interval)": speedup_cell(row_interval(row), row["status"]),
            "verdict": row[f"{SPEEDUP}_verdict"], "speedup (mean)": number_cell(row[f"{SPEEDUP}_mean"]),
            "% FMA": number_cell(row["pct_fma"], 1), "% memory bound": number_cell(row["pct_memory_bound"], 1)}


def geomean_cells(speedups, means) -> dict:
    """The geomean row under a contender's :func:`speedup_cells` rows: the geometric means of its
    speedups of medians and of means, the other cells empty."""
    return {**dict.fromkeys(("sparsetir ms", "best baseline", "baseline ms"), ""),
            "speedup (median, 90% interval)": number_cell(geomean(speedups)), "verdict": "",
            "speedup (mean)": number_cell(geomean(means)), "% FMA": "", "% memory bound": ""}


#: The headline section's note, the same in every family's report.
HEADLINE_NOTE = ("Per sparsetir contender: the geometric mean of its speedups over the {versus} with its 90% bootstrap "
                 "interval over the interleaved rounds, and its wins / ties / losses (a tie: the interval straddles 1).")


def markdown_sections(*sections) -> list[str]:
    """The Markdown lines of ``(heading, block, ...)`` sections, a blank line after each part: the heading
    (``"## ..."``; None: none), then each block: a DataFrame as a pipe table (``(none)`` when empty, missing
    cells blank), a string as a paragraph, any other iterable as its lines."""
    lines = []
    for heading, *blocks in sections:
        if heading:
            lines += [heading, ""]
        for block in blocks:
            if isinstance(block, pd.DataFrame):
                lines.append(block.fillna("").to_markdown(index=False) if len(block) else "(none)")
            else:
                lines += [block] if isinstance(block, str) else list(block)
            lines.append("")
    return lines


def contender_geomean(frame: pd.DataFrame, case: Sequence[str], column: str, contender: str, against: str,
                      samples: dict | None = None) -> Interval:
    """The geometric mean of ``column`` over the cases ``contender`` ran, with its bootstrap interval
    (every case resampled at once: ``intervals.geomean_interval``)."""
    samples = samples_by_case(frame, case) if samples is None else samples
    mine = frame[(frame["contender"] == contender) & (frame["status"] == "ok") & np.isfinite(frame[column])]
    pairs = [(samples.get((*_key(row[list(case)]), row[against])), row["samples_s"]) for _, row in mine.iterrows()]
    return geomean_interval(pairs)


def headline_table(frame: pd.DataFrame, case: Sequence[str], column: str = SPEEDUP, against: str = "best_baseline",
                   prefix: str = SPARSETIR) -> pd.DataFrame:
    """Per contender whose name starts with ``prefix``: geomean with interval, wins / ties / losses, cases."""
    rows = []
    samples = samples_by_case(frame, case)
    for contender in dict.fromkeys(frame["contender"]):
        if not str(contender).startswith(prefix):
            continue
        mine = frame[(frame["contender"] == contender) & (frame["status"] == "ok") & np.isfinite(frame[column])]
        counts = verdict_counts([row_interval(row, column) for _, row in mine.iterrows()])
        rows.append({"contender": contender,
                     "geomean": contender_geomean(frame, case, column, contender, against, samples).text(),
                     "wins": counts["win"], "ties": counts["tie"], "losses": counts["loss"], "cases": len(mine)})
    return pd.DataFrame(rows, columns=["contender", "geomean", "wins", "ties", "losses", "cases"])


def case_groups(frame: pd.DataFrame, case: Sequence[str], order: Mapping[str, Sequence] | None = None):
    """``(key, rows)`` per case, in the order of ``order`` (column -> values first) then of appearance."""
    keys = list(dict.fromkeys(_key(k) for k in frame[list(case)].itertuples(index=False)))
    if order:
        for column, values in order.items():
            index = list(case).index(column)
            rank = {value: i for i, value in enumerate(values)}
            keys.sort(key=lambda key: rank.get(key[index], len(rank)))
    table = frame.assign(_key=[_key(k) for k in frame[list(case)].itertuples(index=False)])
    for key in keys:
        yield key, table[table["_key"] == key].drop(columns="_key")


def did_not_run(rows: pd.DataFrame) -> bool:
    """The case could not run at all: its one row is the ``*`` row."""
    return len(rows) == 1 and rows["contender"].iloc[0] == ALL


#: the interval and verdict columns :func:`add_speedups` adds to a long table
INTERVAL_COLUMNS = [f"{SPEEDUP}_{suffix}" for suffix in ("low", "high", "verdict")]
