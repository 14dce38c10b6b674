"""Workflow steps of the full-graph training experiments the families declare (``Family.trainer``,
``Family.trainings``: a ``bench.training.Trainer`` each), one module, three steps (``snakemake.params.step``):

``train``    one dataset: every contender (sparsetir's layer, the baselines the libraries declare
             for the family) trained from one initial state_dict, scored, then one epoch of each
             timed interleaved (the trainer's benchmark); writes its records atomically;
``tables``   ``speedup.csv``, ``.md``, ``.tex``: per (dataset, contender) ms per epoch (median,
             p20, p80), speedup over the best baseline, test accuracy and its difference from the
             best baseline's (points), peak memory (GAT) against PyG's, set-up and first-epoch
             seconds; the Markdown gives the geometric mean speedup against the config's target
             and the load average while the jobs ran;
``figures``  ``epoch_time.png``: ms per epoch per graph, one bar per contender (log scale).

The trainers come from the family registry (``sparsetir.bench.families.trainers``); a new training
experiment is one declaration there and one config section.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SPARSETIR_PREFIX = "sparsetir"


def _trainer(experiment: str):
    from sparsetir.bench.families import trainers

    known = trainers()
    if experiment not in known:
        raise ValueError(f"unknown training experiment {experiment!r}; known: {', '.join(known)}")
    return known[experiment]


def check_training_config(experiment: str, section: dict, where: str) -> dict:
    """What the schema cannot check: the datasets a trainer knows. Raises ``ValueError`` naming the key."""
    try:
        trainer = _trainer(experiment)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    for name in section["datasets"]:
        try:
            trainer.check_dataset(name)
        except ValueError as error:
            raise ValueError(f"config {where}.datasets: {error}") from None
    return section


def train(*, experiment: str, output: Path, dataset: str, section: dict, data: dict, threads: int) -> list[dict]:
    from prepare_dataset import configure_data_routes

    from sparsetir.bench.threads import configure_threads

    configure_data_routes(data)
    for warning in configure_threads(threads):  # spin limits and threads, before torch/TVM load
        print(warning, file=sys.stderr)
    import torch

    torch.set_num_threads(threads)
    from sparsetir.bench.records import write_json_atomic
    from sparsetir.bench.training import TRAINING_POLICY

    trainer = _trainer(experiment)
    settings = trainer.settings(epochs=section["epochs"], seed=section.get("seed", 0))
    samples = section["samples"]
    policy = TRAINING_POLICY.replace(samples=samples, min_samples=min(samples, TRAINING_POLICY.min_samples))
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    records = trainer.benchmark(dataset, settings, contenders=trainer.contenders(section.get("baselines")),
                                policy=policy, log=log)
    log(trainer.summary(records))
    write_json_atomic(output, records)
    return records


# ------------------------------------------------------------------------------------------ tables
def _is_baseline(contender: str) -> bool:
    return not contender.startswith(SPARSETIR_PREFIX)


def summary_frame(records: list[dict]) -> pd.DataFrame:
    """One row per (dataset, contender) (see the module docstring)."""
    rows = []
    for r in records:
        stats = r.get("stats") or {}
        ok = r.get("status") == "ok"
        peak = r.get("peak_memory_bytes")
        rows.append({
            "dataset": r["dataset"], "contender": r["contender"], "status": r["status"], "reason": r.get("reason"),
            "labelled": r.get("labelled", True),
            "ms_per_epoch": stats.get("median", math.nan) * 1e3 if ok else math.nan,
            "p20_ms": stats.get("p20", math.nan) * 1e3 if ok else math.nan,
            "p80_ms": stats.get("p80", math.nan) * 1e3 if ok else math.nan,
            "test_acc": r.get("test_acc") if r.get("test_acc") is not None else math.nan,
            "peak_mib": peak / 2**20 if peak else math.nan,
            "setup_s": (r.get("times") or {}).get("setup_s") or math.nan,
            "first_epoch_s": r.get("first_epoch_s") if r.get("first_epoch_s") is not None else math.nan,
            "loadavg_1min": ((r.get("provenance") or {}).get("loadavg") or [math.nan])[0],
            "samples_s": list(stats.get("samples") or []) if ok else [],
        })
    table = pd.DataFrame(rows, columns=["dataset", "contender", "status", "reason", "labelled", "ms_per_epoch",
                                        "p20_ms", "p80_ms", "test_acc", "peak_mib", "setup_s", "first_epoch_s",
                                        "loadavg_1min", "samples_s"])
    from sparsetir.bench.report.tables import speedups_over_best

    table = speedups_over_best(table, ["dataset"], table["contender"].map(_is_baseline), "ms_per_epoch")
    accuracy = table.set_index(["dataset", "contender"])["test_acc"]
    best_acc = [accuracy.get((d, b), math.nan) if isinstance(b, str) else math.nan
                for d, b in zip(table["dataset"], table["best_baseline"])]
    table["acc_diff_points"] = [(acc - best) * 100 if labelled else math.nan
                                for acc, best, labelled in zip(table["test_acc"], best_acc, table["labelled"])]
    pyg = table[(table["status"] == "ok") & table["contender"].str.startswith("pyg-")].groupby("dataset")["peak_mib"].min()
    table["peak_vs_pyg"] = [peak / pyg.get(d, math.nan) if status == "ok" else math.nan
                            for d, peak, status in zip(table["dataset"], table["peak_mib"], table["status"])]
    return table


def _cell(value, digits: int, suffix: str = "") -> str:
    return "—" if value is None or not np.isfinite(value) else f"{value:.{digits}f}{suffix}"


def markdown(table: pd.DataFrame, experiment: str, target: float | None) -> str:
    from sparsetir.bench.report.intervals import geomean
    from sparsetir.bench.report.tables import headline_table, row_interval, speedup_cell

    title = _trainer(experiment).title
    parts = [f"# {experiment}: {title} (ms per epoch; speedup over the best baseline)", ""]
    load = table["loadavg_1min"].dropna()
    if len(load):
        parts += [f"Load average (1 min) while the jobs ran: {load.min():.2f} to {load.max():.2f} (figures taken "
                  "above about 1.5 on a 2-core machine are not quotable).", ""]
    timed = table[table["status"] == "ok"]
    if timed.empty:
        parts += ["No contender was timed.", ""]
    else:
        shown = pd.DataFrame({
            "dataset": timed["dataset"], "contender": timed["contender"],
            "ms/epoch (p20–p80)": [f"{m:.1f} ({a:.1f}–{b:.1f})" for m, a, b in
                                    zip(timed["ms_per_epoch"], timed["p20_ms"], timed["p80_ms"])],
            "speedup (90% interval)": [speedup_cell(row_interval(row)) for _, row in timed.iterrows()],
            "verdict": timed["speedup_vs_best_baseline_verdict"],
            "test acc": [_cell(v, 3) if lab else "time only" for v, lab in zip(timed["test_acc"], timed["labelled"])],
            "acc − best (points)": [_cell(v, 1) for v in timed["acc_diff_points"]],
            "peak MiB (vs PyG)": [_cell(p, 1) + (f" ({r:.2f}x)" if np.isfinite(r) else "")
                                  for p, r in zip(timed["peak_mib"], timed["peak_vs_pyg"])],
            "set-up s": [_cell(v, 2) for v in timed["setup_s"]],
            "first epoch s": [_cell(v, 2) for v in timed["first_epoch_s"]],
        })
        parts += ["## Headline", "", "Per sparsetir contender: the geometric mean of its speedups over the best "
                  "baseline with its 90% bootstrap interval over the timed epochs, and its wins / ties / losses (a "
                  "tie: the interval straddles 1).", "", headline_table(table, ["dataset"]).to_markdown(index=False),
                  "", "## Per graph", "", shown.to_markdown(index=False), ""]
        lines = []
        for contender in dict.fromkeys(timed["contender"]):
            if _is_baseline(contender):
                continue
            mine = timed[timed["contender"] == contender]
            value = geomean(mine["speedup_vs_best_baseline"])
            if not np.isfinite(value):
                lines.append(f"- {contender}: no speedup (no timed baseline)")
                continue
            verdict = "" if target is None else f" (target {target}x: {'met' if value >= target else 'not met'})"
            worst = mine["speedup_vs_best_baseline"].min()
            lines.append(f"- {contender}: geometric mean {value:.2f}x over the best baseline on "
                         f"{int(np.isfinite(mine['speedup_vs_best_baseline']).sum())} graph(s), lowest {worst:.2f}x"
                         f"{verdict}")
        parts += ["## Targets", "", *lines, ""]
    failed = table[table["status"] != "ok"]
    if not failed.empty:
        parts += ["## Not run", "", failed[["dataset", "contender", "status", "reason"]].to_markdown(index=False), ""]
    return "\n".join(parts)


def tables(*, records_paths, experiment: str, target, csv: Path, md: Path, tex: Path) -> pd.DataFrame:
    from sparsetir.bench.records import write_text_atomic
    from sparsetir.bench.report.summary import interference_paragraph

    records = []
    for path in records_paths:
        records += json.loads(Path(path).read_text())
    table = summary_frame(records)
    write_text_atomic(csv, table.drop(columns=["samples_s"]).to_csv(index=False))
    write_text_atomic(md, markdown(table, experiment, target) + interference_paragraph(records))
    columns = ["dataset", "contender", "ms_per_epoch", "speedup_vs_best_baseline", "test_acc", "peak_mib"]
    write_text_atomic(tex, table[table["status"] == "ok"][columns].round(3).to_latex(index=False, escape=True,
                                                                                     na_rep="--"))
    return table


# ------------------------------------------------------------------------------------------ figures
def epoch_time_figure(frame: pd.DataFrame, experiment: str, path: Path) -> None:
    """ms per epoch per graph and contender on a linear axis from 0 (p20–p80 error bars)."""
    from sparsetir.bench.report.figures import time_figure

    time_figure(frame, path, case=["dataset"], label=lambda row: str(row["dataset"]),
                title=f"{_trainer(experiment).title}: ms per epoch (lower is better)", value="ms_per_epoch",
                ylabel="ms per epoch (median)", low="p20_ms", high="p80_ms")


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from step_log import output_to_log

    params = snakemake.params
    with output_to_log(snakemake.log[0]):
        if params.step == "train":
            train(experiment=params.experiment, output=Path(snakemake.output[0]), dataset=params.dataset,
                  section=params.section, data=params.data, threads=snakemake.threads)
        elif params.step == "tables":
            tables(records_paths=snakemake.input.records, experiment=params.experiment,
                   target=params.section.get("target"), csv=Path(snakemake.output.csv), md=Path(snakemake.output.md),
                   tex=Path(snakemake.output.tex))
        else:
            epoch_time_figure(pd.read_csv(snakemake.input[0]), params.experiment, Path(snakemake.output[0]))
