"""The workflow's attention tables (pandas): ``speedup.csv``, ``speedup.md`` and ``speedup.tex``.

From the records of every sequence length and of PrunedBERT (``sparsetir.bench.families.attention``):

- ``speedup.csv`` (long): one row per (experiment, case, contender), what did not run included
  with its reason; ms per call (median, p20, p80, mean), the reference of the case (the fastest
  timed contender of the configured reference list: for attention the best of FlexAttention,
  SDPA with the dense mask and torch's BSR; for PrunedBERT dense MKL), the speedup over it
  (``reference median / median``, > 1 is faster; ``_mean`` from the means), the speedup over SDPA
  with the dense mask, and the conversion and compile times (FlexAttention's ``torch.compile``
  is its compile time, paid once per shape).
- ``speedup.md``: ms per call (case x contender), each sparsetir contender over the reference per
  case with the geometric mean, the setup times, PrunedBERT with its best sparse format per
  weight, and what did not run and why.
- ``speedup.tex``: the ms-per-call table with the speedup columns (booktabs).

Figures: the attention figures, from ``speedup.csv``.

``attention_speedup.png`` (and ``.svg``): each sparsetir contender's speedup over the case's reference per case
(mask and sequence length), the ratio of medians with its 90% interval (``sparsetir.bench.report.figures``).
``prunedbert_speedup.png``: the same for PrunedBERT's pruned weights (reference: dense MKL).
Cases that did not run keep an empty slot, named under the axes; the tables say why.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from ...records import read_records, write_text_atomic
from .. import tables
from ..figures import speedup_figure as draw
from ..intervals import geomean, number_cell
from ..summary import interference_paragraph
from ..tables import add_speedups, headline_table, long_frame, ratio_columns, row_interval, speedup_cell, timing_fields

SPARSETIR = "sparsetir"
ALL = "*"
SDPA_MASK = "sdpa-dense-mask"
CASE = ["experiment", "case"]
INTERVALS = [f"{column}_{suffix}" for column in ("speedup_vs_reference", "speedup_vs_sdpa_mask")
             for suffix in ("low", "high", "verdict")]
COLUMNS = ["experiment", "case", "mask", "seq", "contender", "kind", "variant", "status", "reason", "block_sparsity",
           "shape", "nnz", "median_ms", "p20_ms", "p80_ms", "mean_ms", "samples", "reference", "reference_ms",
           "reference_mean_ms", "speedup_vs_reference", "speedup_vs_reference_mean", "speedup_vs_sdpa_mask",
           "relative_error", "convert_ms", "compile_s"]


def attention_frame(records: Iterable[dict], reference: Sequence[str], prunedbert_reference: str | None = None
                    ) -> pd.DataFrame:
    """The long table (see the module docstring); a later record of a (case, contender) wins."""
    rows = []
    for record in records:
        case = record.get("setting") or {}
        kind = record.get("kind") or (SPARSETIR if record["contender"].startswith(SPARSETIR) else "baseline")
        rows.append({
            "experiment": record["experiment"], "case": record["dataset"], "mask": case.get("mask"),
            "seq": case.get("seq"), "kind": kind, **timing_fields(record),
            "block_sparsity": case.get("block_sparsity", case.get("sparsity")),
            "shape": "x".join(str(d) for d in record["shape"]) if record.get("shape") else None,
            "nnz": record.get("nnz"), "relative_error": case.get("relative_error"),
        })
    frame = long_frame(rows, ["experiment", "case"], ("block_sparsity", "relative_error", "seq", "nnz"),
                       what="attention")
    references = {"attention": list(reference), "prunedbert": [prunedbert_reference] if prunedbert_reference else []}
    pool = pd.Series([c in references.get(e, []) for e, c in zip(frame["experiment"], frame["contender"])],
                     index=frame.index)
    frame = add_speedups(frame, CASE, pool, versus="reference", column="speedup_vs_reference")
    sdpa = frame[(frame["contender"] == SDPA_MASK) & (frame["status"] == "ok")].set_index(CASE)["median_ms"]
    sdpa_ms = pd.Series([sdpa.get(tuple(k), math.nan) for k in frame[CASE].itertuples(index=False)], index=frame.index)
    ratio_columns(frame, CASE, pd.Series(SDPA_MASK, index=frame.index), sdpa_ms / frame["median_ms"],
                  "speedup_vs_sdpa_mask")
    return frame[[*COLUMNS, *INTERVALS, "samples_s"]]


def _contenders(frame: pd.DataFrame) -> list[str]:
    names = [c for c in dict.fromkeys(frame["contender"]) if c != ALL]
    return sorted(names, key=lambda name: (not name.startswith(SPARSETIR), names.index(name)))


def wide(frame: pd.DataFrame, column: str, digits: int = 3) -> pd.DataFrame:
    """Case x contender table of ``column`` ("—" where a contender has no value)."""
    contenders = _contenders(frame)
    rows = []
    for case in dict.fromkeys(frame["case"]):
        mine = frame[frame["case"] == case].set_index("contender")
        sparsity = mine["block_sparsity"].dropna()
        label = f"{case} ({100 * sparsity.iloc[0]:.1f}% sparse)" if len(sparsity) else case
        if ALL in mine.index and len(mine) == 1:
            rows.append({"case": label, **{c: "unavailable" for c in contenders}})
            continue
        rows.append({"case": label, **{c: number_cell(mine[column].get(c), digits) for c in contenders}})
    return pd.DataFrame(rows, columns=["case", *contenders])


def speedup_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per sparsetir contender and case: its ms, the reference and its ms, the speedups; then the
    geometric mean and the lowest speedup over SDPA with the dense mask."""
    rows = []
    ours = [c for c in _contenders(frame) if frame.loc[frame["contender"] == c, "kind"].eq(SPARSETIR).any()]
    for contender in ours:
        mine = frame[(frame["contender"] == contender) & (frame["status"] == "ok")]
        for _, row in mine.iterrows():
            rows.append({"sparsetir": contender, "case": row["case"], "ms": number_cell(row["median_ms"], 3),
                         "reference": row["reference"] if isinstance(row["reference"], str) else "—",
                         "reference ms": number_cell(row["reference_ms"], 3),
                         "speedup (median, 90% interval)": speedup_cell(row_interval(row, "speedup_vs_reference")),
                         "verdict": row["speedup_vs_reference_verdict"],
                         "speedup (mean)": number_cell(row["speedup_vs_reference_mean"]),
                         "vs SDPA mask": speedup_cell(row_interval(row, "speedup_vs_sdpa_mask"))})
        if len(mine):
            rows.append({"sparsetir": contender, "case": "geomean", "ms": "", "reference": "", "reference ms": "",
                         "speedup (median, 90% interval)": number_cell(geomean(mine["speedup_vs_reference"])),
                         "verdict": "",
                         "speedup (mean)": number_cell(geomean(mine["speedup_vs_reference_mean"])),
                         "vs SDPA mask": f"min {number_cell(mine['speedup_vs_sdpa_mask'].min())}"})
    return pd.DataFrame(rows)


def setup_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Conversion (ms) and compile (s) of every timed contender that has them."""
    timed = frame[(frame["status"] == "ok") & (frame["convert_ms"].notna() | frame["compile_s"].notna())]
    table = timed[["case", "contender", "convert_ms", "compile_s"]].copy()
    table["convert_ms"] = [number_cell(v, 1) for v in table["convert_ms"]]
    table["compile_s"] = [number_cell(v, 2) for v in table["compile_s"]]
    return table.rename(columns={"convert_ms": "convert ms", "compile_s": "compile s"}).reset_index(drop=True)


def best_sparse_format(frame: pd.DataFrame) -> pd.DataFrame:
    """PrunedBERT: per weight, the fastest sparsetir format and its speedup over the reference."""
    rows = []
    for case, group in frame.groupby("case", sort=False):
        ours = group[(group["kind"] == SPARSETIR) & (group["status"] == "ok") & group["median_ms"].notna()]
        if ours.empty:
            continue
        best = ours.loc[ours["median_ms"].idxmin()]
        rows.append({"weight": case, "shape": best["shape"], "sparsity": number_cell(best["block_sparsity"], 3),
                     "best format": best["contender"], "ms": number_cell(best["median_ms"], 3),
                     "reference": best["reference"], "reference ms": number_cell(best["reference_ms"], 3),
                     "speedup": number_cell(best["speedup_vs_reference"]), "_speedup": best["speedup_vs_reference"]})
    if rows:
        rows.append({"weight": "geomean", "speedup": number_cell(geomean(r["_speedup"] for r in rows))})
    table = pd.DataFrame(rows)
    return table.drop(columns=["_speedup"]) if "_speedup" in table.columns else table


def markdown_report(frame: pd.DataFrame) -> str:
    attention = frame[frame["experiment"] == "attention"]
    prunedbert = frame[frame["experiment"] == "prunedbert"]
    lines = [
        "# attention: block-sparse attention, ms per call (median)",
        "",
        "Every contender gets the same seeded q, k, v, is checked against a float64 reference before timing, and is "
        "timed interleaved with a cache flush before every call. Speedups are the reference's time over the "
        "contender's (> 1 is faster); the reference of a case is the fastest of FlexAttention (BlockMask, both block "
        "sizes), SDPA with the dense mask and torch's BSR. Setup (conversion; FlexAttention's torch.compile, once "
        "per shape) is not kernel time and has its own table.",
        "",
    ]
    lines += tables.markdown_sections(
        ("## Headline", tables.HEADLINE_NOTE.format(versus="reference"),
         headline_table(attention, CASE, "speedup_vs_reference", "reference")),
        ("## ms per call (median)", wide(attention, "median_ms")),
        ("## sparsetir over the reference", speedup_summary(attention)),
        ("## Setup: conversion and compile", setup_table(attention)))
    if len(prunedbert):
        lines += tables.markdown_sections(
            ("# PrunedBERT: pruned weights (DLMC) times activations, ms per call (median)",
             "``ops.spmm(W, X)`` in sparse formats against dense ``torch.mm`` (MKL) and torch's CSR; the reference "
             "is dense MKL.", headline_table(prunedbert, CASE, "speedup_vs_reference", "reference"),
             wide(prunedbert, "median_ms")),
            ("## Best sparse format per weight", best_sparse_format(prunedbert)))
    missing = frame[frame["status"] != "ok"][["case", "contender", "status", "reason"]]
    lines += tables.markdown_sections(("## Did not run", missing))
    return "\n".join(lines)


def latex_table(frame: pd.DataFrame) -> str:
    attention = frame[frame["experiment"] == "attention"]
    table = wide(attention, "median_ms")
    for contender in [c for c in table.columns if c.startswith(SPARSETIR)]:
        speedups = attention[attention["contender"] == contender].set_index("case")["speedup_vs_reference"]
        table[f"{contender} speedup"] = [number_cell(speedups.get(case)) for case in dict.fromkeys(attention["case"])]
    return table.to_latex(index=False, escape=True)


def write_tables(records: list[dict], csv: Path, md: Path, tex: Path, reference: Sequence[str],
                 prunedbert_reference: str | None = None) -> pd.DataFrame:
    """Aggregate ``records`` and write the three tables atomically; return the long frame."""

    frame = attention_frame(records, reference, prunedbert_reference)
    write_text_atomic(csv, frame.drop(columns=["samples_s"]).to_csv(index=False))
    write_text_atomic(md, markdown_report(frame) + interference_paragraph(records))
    write_text_atomic(tex, latex_table(frame))
    return frame


# ------------------------------------------------------------ figures

def speedup_figure(frame: pd.DataFrame, path: Path, title: str) -> None:
    """Each sparsetir contender's speedup over the case's reference (ratio of medians, 90% interval)."""

    draw(frame, path, case=["experiment", "case"], label=lambda row: str(row["case"]), title=title,
         column="speedup_vs_reference", versus="the reference")


def write_figures(csv: Path, attention_png: Path, prunedbert_png: Path) -> None:
    frame = pd.read_csv(csv)
    speedup_figure(frame[frame["experiment"] == "attention"], attention_png,
                   "block-sparse attention (speedup over the best of FlexAttention / SDPA-mask / torch BSR)")
    speedup_figure(frame[frame["experiment"] == "prunedbert"], prunedbert_png,
                   "PrunedBERT: pruned weight x activations (speedup over dense MKL)")


def workflow_tables(records: list[Path], outputs: dict, settings: dict) -> pd.DataFrame:
    """The tables of the records files ``records`` (the workflow's tables job; ``settings``: the config section)."""
    return write_tables(read_records(records), outputs["csv"], outputs["md"], outputs["tex"], settings["reference"],
                        (settings.get("prunedbert") or {}).get("reference"))


def workflow_figures(csv: Path, outputs: dict) -> None:
    """The figures of ``speedup.csv`` (the workflow's figures job)."""
    write_figures(csv, outputs["attention"], outputs["prunedbert"])
