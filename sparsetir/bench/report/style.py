"""One figure style for every experiment (seaborn): speedup axes, colours, markers, saving.

- Speedups are on a log2 axis with ticks ``0.5×, 1×, 2×, 4×, ...`` (never ``2×10⁰``), a line
  at 1×, and one y-range for every panel of a figure (:func:`speedup_limits`).
- Colours come from seaborn's colour-blind palette, at most eight; series beyond eight reuse a
  colour with another marker (:func:`series_styles`), and figures label points directly where
  a legend would not tell them apart.
- :func:`save_figure` writes each figure as PNG and SVG, atomically.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from ..records import write_bytes_atomic  # noqa: E402

MAX_COLOURS = 8
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "<", ">", "h")
PALETTE = tuple(sns.color_palette("colorblind", MAX_COLOURS))


def apply_style() -> None:
    """The seaborn theme every figure uses (white grid, paper context, the colour-blind palette)."""
    sns.set_theme(style="whitegrid", context="paper", palette=list(PALETTE))
    plt.rcParams.update({"svg.fonttype": "none", "figure.dpi": 120, "axes.titlesize": "medium"})


def series_styles(names: Iterable[str]) -> dict[str, tuple]:
    """``name -> (colour, marker)``: eight colours, then the same colours with the next marker."""
    styles = {}
    for index, name in enumerate(dict.fromkeys(names)):
        styles[name] = (PALETTE[index % MAX_COLOURS], MARKERS[(index // MAX_COLOURS) % len(MARKERS)])
    return styles


MIN_SPEEDUP, MAX_SPEEDUP = 1 / 16, 256.0  # the widest y-range; a bar beyond it is marked at its edge


def speedup_limits(values: Iterable[float], *, floor: float = 0.5, ceiling: float = 2.0) -> tuple[float, float]:
    """A y-range holding every finite positive value (intervals included) and 1×, padded to powers of
    two and kept within 1/16× .. 256×."""
    finite = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    low = max(min([floor, *finite]), MIN_SPEEDUP)
    high = min(max([ceiling, *finite]), MAX_SPEEDUP)
    return 2.0 ** math.floor(math.log2(low) + 1e-9), 2.0 ** math.ceil(math.log2(high) - 1e-9)


def speedup_ticks(low: float, high: float) -> list[float]:
    """Powers of two from ``low`` to ``high`` (every other one when there are more than eight)."""
    exponents = list(range(math.floor(math.log2(low)), math.ceil(math.log2(high)) + 1))
    step = 1 if len(exponents) <= 8 else 2
    ticks = [2.0 ** e for e in exponents[::step]]
    return ticks if 1.0 in ticks else sorted({*ticks, 1.0})


def tick_label(value: float, _position=None) -> str:
    """``0.5×``, ``1×``, ``2×``, ``0.25×``, ``0.0625×``."""
    return f"{value:.4g}×"


def plain_log_axis(axis, which: str = "x") -> None:
    """A log axis labelled ``0.5, 1, 2, 10`` instead of ``5×10⁻¹``."""
    target = axis.xaxis if which == "x" else axis.yaxis
    target.set_major_formatter(FuncFormatter(lambda value, _position: f"{value:.4g}"))
    target.set_minor_formatter(FuncFormatter(lambda value, _position: ""))


def speedup_axis(axis, limits: tuple[float, float], label: str) -> None:
    """Log2 speedup axis with ``×`` ticks over ``limits``, a line at 1×, and ``label``."""
    axis.set_yscale("log", base=2)
    axis.set_ylim(*limits)
    axis.yaxis.set_major_locator(FixedLocator(speedup_ticks(*limits)))
    axis.yaxis.set_major_formatter(FuncFormatter(tick_label))
    axis.yaxis.set_minor_locator(NullLocator())
    axis.axhline(1.0, color="black", linewidth=0.9, zorder=1)
    axis.set_ylabel(label)


def grouped_bars(axis, groups: Sequence[str], series: Sequence[str], values: dict, low: dict | None = None,
                 high: dict | None = None, styles: dict | None = None, limits: tuple[float, float] | None = None,
                 base: float = 1.0) -> None:
    """Bars from ``base`` (1× on a speedup axis, 0 on a time axis) per ``(group, series)``
    (``values[(group, series)]``), with interval error bars where ``low``/``high`` give them; missing
    pairs leave a gap. With ``limits``, a bar beyond the axis is drawn to its edge and marked there
    with a triangle and its value, never cut off silently."""
    styles = styles or series_styles(series)
    width = 0.8 / max(len(series), 1)
    for s_index, name in enumerate(series):
        xs, heights, errors, clipped = [], [], [[], []], []
        for g_index, group in enumerate(groups):
            value = values.get((group, name))
            if value is None or not math.isfinite(value) or (base > 0 and value <= 0):
                continue
            x = g_index - 0.4 + width * (s_index + 0.5)
            lo = (low or {}).get((group, name), value)
            hi = (high or {}).get((group, name), value)
            if limits is not None and not limits[0] <= value <= limits[1]:
                clipped.append((x, value))
                value = min(max(value, limits[0]), limits[1])
                lo = hi = value
            xs.append(x)
            heights.append(value)
            errors[0].append(max(value - lo, 0.0) if math.isfinite(lo) else 0.0)
            errors[1].append(max(hi - value, 0.0) if math.isfinite(hi) else 0.0)
            if limits is not None:  # an error bar past the axis edge stops at it
                errors[1][-1] = min(errors[1][-1], limits[1] - value)
                errors[0][-1] = min(errors[0][-1], value - limits[0])
        colour = styles[name][0]
        # bars grow from the base line: up for a speedup, down for a slowdown
        axis.bar(xs, [h - base for h in heights], width=width * 0.95, color=colour, label=str(name), bottom=base,
                 zorder=2)
        if low is not None and xs:
            axis.errorbar(xs, heights, yerr=errors, fmt="none", ecolor="black", elinewidth=0.8, capsize=2, zorder=3)
        for x, value in clipped:
            edge = limits[1] if value > limits[1] else limits[0]
            axis.plot([x], [edge], marker="^" if value > limits[1] else "v", color="black", markersize=6,
                      zorder=4, clip_on=False)
            axis.annotate(f"{value:.3g}×" if base == 1.0 else f"{value:.3g}", (x, edge), fontsize="x-small",
                          xytext=(0, 6 if value > limits[1] else -10), textcoords="offset points", ha="center",
                          annotation_clip=False)
    axis.set_xticks(range(len(groups)))
    axis.set_xticklabels(groups, rotation=30, ha="right")


def message_figure(text: str):
    """A figure that says why there is nothing to plot."""
    figure, axis = plt.subplots(figsize=(6, 2))
    axis.axis("off")
    axis.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return figure


def save_figure(figure, path: str | Path) -> list[Path]:
    """Write ``figure`` to ``path`` (PNG) and beside it as SVG; returns both paths."""
    path = Path(path)
    written = []
    for suffix, options in ((".png", {"dpi": 150}), (".svg", {})):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=suffix[1:], bbox_inches="tight", **options)
        written.append(write_bytes_atomic(path.with_suffix(suffix), buffer.getvalue()))
    plt.close(figure)
    return written
