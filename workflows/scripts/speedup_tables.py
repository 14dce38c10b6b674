"""Workflow step: speedup tables of one experiment (pandas): ``speedup.csv``, ``.md`` and ``.tex``.

For every case (device, dataset, feature size) each timed contender gets:

- ``speedup_vs_reference``: the reference's median over the contender's median (> 1: faster),
  and ``speedup_vs_reference_mean`` from the means. The reference is the experiment's
  configured baseline per device (cuSPARSE for SpMM on a GPU, torch ``sampled_addmm`` for
  SDDMM), or, with ``best-cpu-library``, the fastest CPU library of that case.
- on the CPU, ``speedup_vs_best_cpu`` (and ``_mean``): over the fastest (by median) of the
  configured CPU libraries in that case.
- ``gbytes_per_s`` and ``dram_fraction``: the min-bytes model (``min_bytes / median``) against
  the copy bandwidth measured in the same run.

The CSV is long (one row per record, contenders that did not run included with their reason).
The Markdown and LaTeX tables are wide: one row per case, one column per contender, each cell
``median speedup (mean speedup)``, a geometric-mean row, and the reasons for what did not run.
When a case has no time for its reference (every CPU library unavailable, a library name that
no record carries, every dataset unavailable), its speedups are ``n/a`` and the Markdown says why.
"""


import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from sparsetir.bench.report.intervals import NAN, Interval, geomean_interval, ratio_interval, rounds_of, verdict_counts
from sparsetir.bench.report.tables import row_interval
from sparsetir.bench.report.tables import speedup_cell as _cell

BEST_CPU = "best-cpu-library"
CASE = ["device", "dataset", "feat"]
_STAT_COLUMNS = {"median": "median_s", "mean": "mean_s", "p20": "p20_s", "p80": "p80_s", "n": "samples"}
_TIME_COLUMNS = ("convert_s", "compile_s", "tune_s")
_NUMERIC = ("nnz", "min_bytes", "flops", "copy_bytes_per_s", *_STAT_COLUMNS.values(), *_TIME_COLUMNS)


def records_frame(records: Iterable[dict]) -> pd.DataFrame:
    """One row per record; a later record for the same (experiment, case, contender) replaces an earlier one."""
    rows = []
    for record in records:
        stats = record.get("stats") or {}
        row = {key: record.get(key) for key in ("experiment", "device", "dataset", "feat", "contender",
                                                "variant", "status", "reason", "nnz", "min_bytes", "flops",
                                                "copy_bytes_per_s")}
        row.update({column: stats.get(key) for key, column in _STAT_COLUMNS.items()})
        row["samples_s"] = rounds_of(stats)
        row.update({key: (record.get("times") or {}).get(key) for key in _TIME_COLUMNS})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(rows[0]) if rows else None)
    if frame.empty:
        raise ValueError("no records to aggregate")
    for column in _NUMERIC:  # a column of only missing values would otherwise be of dtype object
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    # a case is one experiment's: an SpMM record never replaces an SDDMM record of the same dataset
    return frame.drop_duplicates(subset=["experiment", *CASE, "contender"], keep="last").reset_index(drop=True)


def _best_of(ok: pd.DataFrame, libraries: Sequence[str]) -> pd.DataFrame:
    """Per case: the fastest (by median) of ``libraries`` among the timed rows."""
    pool = ok[ok["contender"].isin(libraries)]
    if pool.empty or pool["median_s"].isna().all():
        empty = {column: pd.Series(dtype=ok[column].dtype) for column in CASE}
        return pd.DataFrame({**empty, "best": pd.Series(dtype=object), "best_median": pd.Series(dtype=float),
                             "best_mean": pd.Series(dtype=float)})
    pool = pool[pool["median_s"].notna()]
    best = pool.loc[pool.groupby(CASE)["median_s"].idxmin(), CASE + ["contender", "median_s", "mean_s"]]
    return best.rename(columns={"contender": "best", "median_s": "best_median", "mean_s": "best_mean"})


def speedup_frame(records: Iterable[dict], settings: dict, experiment: str | None = None) -> pd.DataFrame:
    """The long speedup table (see the module docstring) for one experiment's records."""
    frame = records_frame(records)
    if experiment is not None:
        frame = frame[frame["experiment"] == experiment].reset_index(drop=True)
        if frame.empty:
            raise ValueError(f"no records of experiment {experiment!r}")
    frame["feat"] = frame["feat"].astype(int)
    ok = frame[frame["status"] == "ok"]
    best = _best_of(ok[ok["device"] == "cpu"], settings["cpu_libraries"])
    frame = frame.merge(best, on=CASE, how="left")
    reference_median = pd.Series(np.nan, index=frame.index)
    reference_mean = pd.Series(np.nan, index=frame.index)
    reference_name = pd.Series(None, index=frame.index, dtype=object)
    for device, reference in settings["reference"].items():
        on_device = frame["device"] == device
        if reference == BEST_CPU:
            reference_median[on_device] = frame.loc[on_device, "best_median"]
            reference_mean[on_device] = frame.loc[on_device, "best_mean"]
            reference_name[on_device] = frame.loc[on_device, "best"]
            continue
        chosen = ok[(ok["device"] == device) & (ok["contender"] == reference)][CASE + ["median_s", "mean_s"]]
        merged = frame[CASE].merge(chosen, on=CASE, how="left")
        reference_median[on_device] = merged.loc[on_device, "median_s"]
        reference_mean[on_device] = merged.loc[on_device, "mean_s"]
        reference_name[on_device] = reference
    frame["reference"] = reference_name
    frame["speedup_vs_reference"] = reference_median / frame["median_s"]
    frame["speedup_vs_reference_mean"] = reference_mean / frame["mean_s"]
    frame["speedup_vs_best_cpu"] = frame["best_median"] / frame["median_s"]
    frame["speedup_vs_best_cpu_mean"] = frame["best_mean"] / frame["mean_s"]
    samples = {(*key, contender): row_samples for *key, contender, row_samples
               in ok[CASE + ["contender", "samples_s"]].itertuples(index=False)}
    for column, against in (("speedup_vs_reference", frame["reference"]), ("speedup_vs_best_cpu", frame["best"])):
        intervals = [ratio_interval(samples.get((d, ds, f, ref)), row_samples) if status == "ok" and ref else NAN
                     for d, ds, f, ref, row_samples, status in zip(frame["device"], frame["dataset"], frame["feat"],
                                                                  against, frame["samples_s"], frame["status"])]
        frame[f"{column}_low"] = [i.low for i in intervals]
        frame[f"{column}_high"] = [i.high for i in intervals]
        frame[f"{column}_verdict"] = [i.verdict for i in intervals]
    frame["gbytes_per_s"] = frame["min_bytes"] / frame["median_s"] / 1e9
    frame["dram_fraction"] = frame["min_bytes"] / frame["median_s"] / frame["copy_bytes_per_s"]
    frame = frame.rename(columns={"best": "best_cpu_library"}).drop(columns=["best_median", "best_mean"])
    return frame


def geomean(values: pd.Series) -> float:
    """Geometric mean of the finite positive values (NaN when there are none)."""
    values = values[np.isfinite(values) & (values > 0)]
    return float(np.exp(np.log(values).mean())) if len(values) else math.nan


def contender_geomean(frame: pd.DataFrame, column: str, contender: str) -> Interval:
    """The geometric mean of ``column`` over the cases ``contender`` ran, with its bootstrap interval."""
    against = "reference" if column == "speedup_vs_reference" else "best_cpu_library"
    samples = {(*key, name): row_samples for *key, name, row_samples
               in frame[frame["status"] == "ok"][CASE + ["contender", "samples_s"]].itertuples(index=False)}
    mine = frame[(frame["contender"] == contender) & (frame["status"] == "ok") & np.isfinite(frame[column])]
    pairs = [(samples.get((d, ds, f, ref)), row_samples) for d, ds, f, ref, row_samples
             in mine[CASE + [against, "samples_s"]].itertuples(index=False)]
    return geomean_interval(pairs)


def headline_table(frame: pd.DataFrame, column: str, prefix: str = "sparsetir") -> pd.DataFrame:
    """Per contender whose name starts with ``prefix``: geomean with interval, wins/ties/losses, cases."""
    rows = []
    for contender in dict.fromkeys(frame["contender"]):
        if not str(contender).startswith(prefix):
            continue
        mine = frame[(frame["contender"] == contender) & (frame["status"] == "ok") & np.isfinite(frame[column])]
        counts = verdict_counts([row_interval(row, column) for _, row in mine.iterrows()])
        rows.append({"contender": contender, "geomean": contender_geomean(frame, column, contender).text(),
                     "wins": counts["win"], "ties": counts["tie"], "losses": counts["loss"], "cases": len(mine)})
    return pd.DataFrame(rows, columns=["contender", "geomean", "wins", "ties", "losses", "cases"])


def wide_table(frame: pd.DataFrame, column: str, dataset_order: Sequence[str] = ()) -> pd.DataFrame:
    """Cases x contenders, each cell the speedup in ``column`` with its interval (``tie`` where it
    straddles 1), plus a geomean row and notes."""
    contenders = [c for c in dict.fromkeys(frame["contender"]) if c != "*"]
    order = {name: i for i, name in enumerate(dict.fromkeys(list(dataset_order) + list(frame["dataset"])))}
    cases = frame[CASE].drop_duplicates().sort_values(CASE, key=lambda s: s.map(order) if s.name == "dataset" else s)
    table = []
    for device, dataset, feat in cases.itertuples(index=False):
        rows = frame[(frame["device"] == device) & (frame["dataset"] == dataset) & (frame["feat"] == feat)]
        by_contender = rows.set_index("contender")
        entry = {"device": device, "dataset": dataset, "feat": int(feat)}
        for contender in contenders:
            if contender in by_contender.index:
                row = by_contender.loc[contender]
                entry[contender] = _cell(row_interval(row, column), row["status"])
            elif "*" in by_contender.index:
                entry[contender] = by_contender.loc["*", "status"]
            else:
                entry[contender] = "n/a"
        dataset_level = rows[rows["contender"] == "*"]
        entry["note"] = dataset_level["reason"].iloc[0] if len(dataset_level) else ""
        table.append(entry)
    table = _collapse_unavailable_datasets(table)
    geo = {"device": "", "dataset": "geomean", "feat": ""}
    for contender in contenders:
        geo[contender] = _cell(contender_geomean(frame, column, contender))
    geo["note"] = "over the cases each contender ran"
    table.append(geo)
    return pd.DataFrame(table)


def _collapse_unavailable_datasets(rows: list[dict]) -> list[dict]:
    """One row per dataset that could not run at all, listing its feature sizes, not one per size."""
    out, seen = [], {}
    for row in rows:
        key = (row["device"], row["dataset"], row["note"])
        if row["note"] and key in seen:
            seen[key]["feat"] = f"{seen[key]['feat']}, {row['feat']}"
            continue
        if row["note"]:
            row = dict(row)
            seen[key] = row
        out.append(row)
    return out


def not_run_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Contenders (or whole datasets, ``*``) that did not run, with their reason and case count."""
    failed = frame[frame["status"] != "ok"]
    if failed.empty:
        return pd.DataFrame(columns=["contender", "status", "cases", "reason"])
    grouped = failed.groupby(["contender", "status", "reason"], dropna=False).size().reset_index(name="cases")
    return grouped[["contender", "status", "cases", "reason"]]


def _markdown(table: pd.DataFrame) -> str:
    return table.to_markdown(index=False) if not table.empty else "(none)"


def missing_reference_notes(frame: pd.DataFrame, settings: dict) -> list[str]:
    """Why cases have no speedup: per device, how many cases lack a reference time, and the reason."""
    notes = []
    for device in dict.fromkeys(frame["device"]):
        on_device = frame[frame["device"] == device]
        cases = on_device[CASE].drop_duplicates()
        with_reference = on_device[on_device["speedup_vs_reference"].notna()][CASE].drop_duplicates()
        missing = len(cases) - len(with_reference)
        if not missing:
            continue
        scope = (f"No case on {device} has a reference time" if not len(with_reference)
                 else f"{missing} of {len(cases)} cases on {device} have no reference time")
        ran = on_device[on_device["contender"] != "*"]
        if ran.empty:
            why = "no dataset could be prepared"
        elif settings["reference"].get(device) == BEST_CPU:
            libraries = list(settings["cpu_libraries"])
            why = f"none of the CPU libraries ({', '.join(libraries)}) was timed"
            unknown = [name for name in libraries if name not in set(frame["contender"])]
            if unknown:
                why += f"; no record comes from {', '.join(unknown)} (not a variant of a configured baseline)"
        else:
            why = f"the reference, {settings['reference'].get(device, '?')}, was not timed"
        notes.append(f"{scope}: {why}. Those speedups are n/a; the reasons are under \"Did not run\".")
    return notes


def _reference_sentence(frame: pd.DataFrame, settings: dict) -> str:
    parts = []
    for device in dict.fromkeys(frame["device"]):
        reference = settings["reference"].get(device, "?")
        parts.append(f"{device}: {'the best CPU library per case' if reference == BEST_CPU else reference}")
    return "; ".join(parts)


def markdown_report(frame: pd.DataFrame, settings: dict, experiment: str, dataset_order: Sequence[str] = ()) -> str:
    """The Markdown tables of one experiment."""
    copy = frame["copy_bytes_per_s"].dropna()
    lines = [
        f"# {experiment}: speedup over the reference",
        "",
        f"Reference ({_reference_sentence(frame, settings)}). Each cell is the ratio of median times (> 1: faster "
        "than the reference) with its 90% bootstrap interval over the interleaved rounds; \"tie\" marks an interval "
        "that straddles 1.",
    ]
    if len(copy):
        lines.append(f"Copy bandwidth measured in the same runs: {copy.median() / 1e9:.1f} GB/s (median over cases).")
    for note in missing_reference_notes(frame, settings):
        lines += ["", note]
    lines += ["", "## Headline", "", _markdown(headline_table(frame, "speedup_vs_reference"))]
    lines += ["", "## Speedup over the reference", "", _markdown(wide_table(frame, "speedup_vs_reference", dataset_order))]
    if (frame["device"] == "cpu").any() and settings["reference"].get("cpu") != BEST_CPU:
        cpu = frame[frame["device"] == "cpu"]
        lines += ["", "## Speedup over the best CPU library of each case", "",
                  _markdown(wide_table(cpu, "speedup_vs_best_cpu", dataset_order))]
    timed = frame[frame["status"] == "ok"]
    if len(timed):
        fraction = timed.pivot_table(index=["device", "dataset", "feat"], columns="contender", values="dram_fraction",
                                     sort=False)
        lines += ["", "## Achieved fraction of copy bandwidth (min-bytes model)", "",
                  fraction.round(3).reset_index().to_markdown(index=False)]
    lines += ["", "## Did not run", "", _markdown(not_run_table(frame)), ""]
    return "\n".join(lines)


def latex_table(frame: pd.DataFrame, dataset_order: Sequence[str] = ()) -> str:
    """The wide speedup-over-reference table as a LaTeX tabular (booktabs)."""
    table = wide_table(frame, "speedup_vs_reference", dataset_order).drop(columns=["note"])
    return table.to_latex(index=False, escape=True)


def write_tables(records: list[dict], settings: dict, experiment: str, csv: Path, md: Path, tex: Path,
                 dataset_order: Sequence[str] = ()) -> pd.DataFrame:
    """Aggregate ``records`` and write the three tables atomically; return the long frame."""
    from sparsetir.bench.records import write_text_atomic
    from sparsetir.bench.report.summary import interference_paragraph

    frame = speedup_frame(records, settings, experiment)
    write_text_atomic(csv, frame.drop(columns=["samples_s"]).to_csv(index=False))
    write_text_atomic(md, markdown_report(frame, settings, experiment, dataset_order) + interference_paragraph(records))
    write_text_atomic(tex, latex_table(frame, dataset_order))
    return frame


TITLES = {"spmm": "SpMM (Y = A X)", "sddmm": "SDDMM (A ⊙ (X Yᵀ))"}
FIGURES = ("figures/speedup_bars.png", "figures/roofline.png")


def write_summary(records: list[dict], settings: dict, experiment: str, path: Path) -> dict:
    """``summary.json`` of a benchmark experiment (``sparsetir.bench.report.summary``): each device's
    sparsetir contenders against that device's configured reference (the best CPU library)."""
    from sparsetir.bench.report.summary import summary_from_records
    from sparsetir.bench.report.summary import write_summary as write

    reference = {device: ("best" if name == BEST_CPU else name) for device, name in settings["reference"].items()}
    mine = [r for r in records if r.get("experiment") == experiment]
    summary = summary_from_records(mine, experiment, TITLES.get(experiment, experiment), reference=reference,
                                   libraries=list(settings["cpu_libraries"]), tables=["speedup.md", "speedup.csv"],
                                   figures=list(FIGURES))
    write(path, summary)
    return summary


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        from sparsetir.bench.records import read_records

        records = read_records(list(snakemake.input.records) + list(snakemake.input.merged))
        write_tables(records, snakemake.params.settings, snakemake.wildcards.experiment, snakemake.output.csv,
                     snakemake.output.md, snakemake.output.tex, snakemake.params.datasets)
        write_summary(records, snakemake.params.settings, snakemake.wildcards.experiment, snakemake.output.summary)
