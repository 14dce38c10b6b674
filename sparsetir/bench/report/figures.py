"""The figures every family draws from its long table (``speedup.csv``), in the one style (``style``).

- :func:`speedup_figure`: each sparsetir contender's speedup per case over the reference of the
  case, bars from the 1× line on a log2 axis with ``×`` ticks, error bars from the 90% bootstrap
  interval, a bar beyond the axis marked at its edge with its value, each contender's wins / ties /
  losses in the legend;
- :func:`time_figure`: a time per case and contender on a linear axis from 0 (p20–p80 as error
  bars), one panel per value of a panel column;
- every figure names, under its axes, the cases that did not run at all (:func:`not_run_note`),
  and keeps an empty, labelled slot for each, so a missing bar is never silent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from . import style  # noqa: E402
from .tables import ALL, SPARSETIR, SPEEDUP, case_groups, did_not_run  # noqa: E402


def _labels(frame: pd.DataFrame, case: Sequence[str], label: Callable) -> tuple[list[str], list[str]]:
    """Every case's label, and ``label (reason)`` of those that did not run at all."""
    labels, missing = [], []
    for _, rows in case_groups(frame, case):
        name = label(rows.iloc[0])
        labels.append(name)
        if did_not_run(rows) or not (rows["status"] == "ok").any():
            missing.append(f"{name} ({rows['reason'].iloc[0] or rows['status'].iloc[0]})")
    return list(dict.fromkeys(labels)), list(dict.fromkeys(missing))


def not_run_note(figure, missing: Sequence[str], extra: str = "") -> None:
    """Under the axes: the cases that did not run (their slots are empty) and ``extra``."""
    lines = ([f"Not run (empty slots): {'; '.join(missing)}"] if missing else []) + ([extra] if extra else [])
    if lines:
        text = "\n".join(line if len(line) < 160 else line[:157] + "..." for line in lines)
        figure.text(0.01, -0.02, text, ha="left", va="top", fontsize="x-small", wrap=True)


def _verdicts(rows: pd.DataFrame, column: str) -> str:
    column = f"{column}_verdict"
    if column not in rows:
        return f"{len(rows)} cases"
    counts = rows[column].value_counts()
    return f"{counts.get('win', 0)} wins, {counts.get('tie', 0)} ties, {counts.get('loss', 0)} losses"


def speedup_figure(frame: pd.DataFrame, path: str | Path, *, case: Sequence[str], label: Callable, title: str,
                   column: str = SPEEDUP, versus: str = "the reference", prefix: str = SPARSETIR) -> list[Path]:
    """Grouped speedup bars of the ``prefix`` contenders per case (see the module docstring)."""
    style.apply_style()
    labels, missing = _labels(frame, case, label)
    frame = frame.assign(_label=[label(row) for _, row in frame.iterrows()])
    timed = frame[(frame["status"] == "ok") & frame["contender"].astype(str).str.startswith(prefix)
                  & np.isfinite(pd.to_numeric(frame[column], errors="coerce"))]
    if timed.empty:
        figure = style.message_figure(f"{title}: no {prefix} contender was timed against a reference")
        not_run_note(figure, missing)
        return style.save_figure(figure, path)
    series = list(dict.fromkeys(timed["contender"]))
    values = {(r["_label"], r["contender"]): float(r[column]) for _, r in timed.iterrows()}
    low = {(r["_label"], r["contender"]): float(r.get(f"{column}_low", math.nan)) for _, r in timed.iterrows()}
    high = {(r["_label"], r["contender"]): float(r.get(f"{column}_high", math.nan)) for _, r in timed.iterrows()}
    limits = style.speedup_limits([*values.values(), *low.values(), *high.values()])
    figure, axis = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 3), 4.2))
    styles = style.series_styles(series)
    shown = [f"{name} (not run)" if any(m.startswith(f"{name} (") for m in missing) else name for name in labels]
    renamed = {(shown[labels.index(g)], s): v for (g, s), v in values.items()}
    style.grouped_bars(axis, shown, series, renamed, {(shown[labels.index(g)], s): v for (g, s), v in low.items()},
                       {(shown[labels.index(g)], s): v for (g, s), v in high.items()}, styles, limits=limits)
    style.speedup_axis(axis, limits, f"speedup over {versus}\n(ratio of medians, 90% interval)")
    axis.set_title(title)
    handles, names = axis.get_legend_handles_labels()
    counts = {name: _verdicts(timed[timed["contender"] == name], column) for name in series}
    axis.legend(handles, [f"{name}: {counts.get(name, '')}" for name in names], fontsize="small", loc="best")
    figure.tight_layout()
    not_run_note(figure, missing)
    return style.save_figure(figure, path)


def time_figure(frame: pd.DataFrame, path: str | Path, *, case: Sequence[str], label: Callable, title: str,
                value: str, ylabel: str, low: str | None = None, high: str | None = None,
                panel: str | None = None) -> list[Path]:
    """Bars of ``value`` per case and contender on a linear axis from 0, one panel per ``panel`` value."""
    style.apply_style()
    labels, missing = _labels(frame, case, label)
    frame = frame.assign(_label=[label(row) for _, row in frame.iterrows()])
    timed = frame[(frame["status"] == "ok") & (frame["contender"] != ALL)
                  & np.isfinite(pd.to_numeric(frame[value], errors="coerce"))]
    if timed.empty:
        figure = style.message_figure(f"{title}: no contender was timed")
        not_run_note(figure, missing)
        return style.save_figure(figure, path)
    panels = list(dict.fromkeys(timed[panel])) if panel else [None]
    series = list(dict.fromkeys(timed["contender"]))
    styles = style.series_styles(series)
    figure, axes = plt.subplots(1, len(panels), figsize=(max(6.0, 1.1 * len(labels) + 3) * len(panels), 4.2),
                                squeeze=False)
    for axis, name in zip(axes[0], panels):
        mine = timed if name is None else timed[timed[panel] == name]
        groups = [g for g in labels if g in set(mine["_label"])] + \
            [g for g in labels if g not in set(timed["_label"])]  # the cases that did not run keep a slot
        key = lambda r: (r["_label"], r["contender"])  # noqa: E731
        style.grouped_bars(axis, groups, series, {key(r): float(r[value]) for _, r in mine.iterrows()},
                           {key(r): float(r[low]) for _, r in mine.iterrows()} if low else None,
                           {key(r): float(r[high]) for _, r in mine.iterrows()} if high else None, styles, base=0.0)
        axis.set_ylim(bottom=0)
        axis.set_ylabel(ylabel)
        axis.set_title(title if name is None else f"{title}: {name}")
        axis.legend(fontsize="small", loc="best")
    figure.tight_layout()
    not_run_note(figure, missing, "error bars: p20–p80 of the timed rounds" if low else "")
    return style.save_figure(figure, path)
