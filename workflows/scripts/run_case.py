"""Workflow step: time every contender of one (experiment, dataset, feature size); write records.

Spin limits and thread counts are set before torch or TVM load (``sparsetir.bench.threads``), so
the interleaved contenders' thread pools do not spin into each other's samples. The records file
is written atomically: a killed job leaves no partial output, and a rerun redoes only it.
"""


import sys
from pathlib import Path


def load_prepared(document: dict):
    """The float32 CSR matrix that ``prepare_dataset`` stored."""
    import numpy as np
    import scipy.sparse as sp

    with np.load(document["npz"], allow_pickle=False) as arrays:
        return sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"]))


def preload(threads: int, dataset_json: Path) -> int:
    """What every worker of a case imports (torch, TVM, sparsetir's ops and timer: seconds), done once before
    the workers are forked (``case_workers.run_step``); returns the threads that may run at the fork (the main
    one and OpenBLAS's pool, which numpy starts and which stops itself at a fork). Nothing here starts a
    thread pool: ``torch.set_num_threads`` and the baselines' probes (DGL starts a thread) run in each worker.
    A case whose dataset is unavailable imports nothing (its workers only write why)."""
    import json

    from sparsetir.bench.threads import configure_threads
    from sparsetir.bench.workers import threads_running

    if json.loads(dataset_json.read_text())["status"] != "ok":
        return threads_running()
    for warning in configure_threads(threads):  # before torch and TVM load, as main does
        print(warning, file=sys.stderr)
    import numpy  # noqa: F401 - starts OpenBLAS's pool: the threads counted as known

    known = threads_running()
    import torch  # noqa: F401
    import tvm  # noqa: F401

    import sparsetir.bench.case_runner  # noqa: F401
    import sparsetir.ops  # noqa: F401
    return known


def main(*, dataset_json: Path, output: Path, experiment: str, dataset: str, feat: int, settings: dict,
         hyb: dict, timing: dict, device: str, seed: int, threads: int, tuned_json: Path | None = None,
         bandwidth_json: Path | None = None) -> list[dict]:
    import json

    from sparsetir.bench.case_runner import unavailable_records
    from sparsetir.bench.records import write_json_atomic

    document = json.loads(dataset_json.read_text())
    if document["status"] != "ok":  # nothing to time: no need to load torch or TVM
        records = unavailable_records(experiment=experiment, op=experiment, dataset=dataset, feats=[feat],
                                      reason=document["reason"], device=device)
        print(f"{experiment} {dataset} feat {feat}: {records[0]['reason']}", file=sys.stderr)
        write_json_atomic(output, records)
        return records

    from sparsetir.bench.threads import configure_threads

    for warning in configure_threads(threads):  # spin limits and threads, before torch/TVM load
        print(warning, file=sys.stderr)
    import torch

    torch.set_num_threads(threads)
    from harness_config import sparsetir_formats

    from sparsetir.bench.case_runner import run_case
    from sparsetir.ops import get_op
    from sparsetir.timing import TimingPolicy

    matrix = load_prepared(document)
    print(f"{experiment} {dataset} ({matrix.shape[0]:,} x {matrix.shape[1]:,}, {matrix.nnz:,} nnz) feat {feat}: "
          f"timing on {device} with {threads} thread(s)", file=sys.stderr, flush=True)
    records = run_case(
        experiment=experiment, op=experiment, dataset=dataset, matrix=matrix, feat=feat,
        sparsetir_formats=sparsetir_formats(settings, dataset, hyb,
                                            json.loads(tuned_json.read_text()) if tuned_json else None),
        timing=TimingPolicy.from_mapping(timing), kernel_factory=get_op(experiment).benchmark_kernel,
        baseline_names=settings["baselines"],
        options=settings.get("options") or {}, device=device, seed=seed,
        bandwidth=json.loads(bandwidth_json.read_text()) if bandwidth_json else None,
    )
    print(summary(records), file=sys.stderr, flush=True)
    write_json_atomic(output, records)
    return records


def summary(records: list[dict]) -> str:
    """One line per contender: median ms or why it did not run."""
    lines = []
    for record in records:
        outcome = f"{record['stats']['median'] * 1e3:9.3f} ms" if record["status"] == "ok" else record["reason"]
        lines.append(f"  {record['contender']:<20} {outcome}")
    return "\n".join(lines)


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from case_workers import run_step
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        run_step(__file__, main, dict(
            dataset_json=Path(snakemake.input.dataset),
            tuned_json=Path(snakemake.input.tuned) if "tuned" in snakemake.input.keys() else None,
            bandwidth_json=Path(snakemake.input.bandwidth) if "bandwidth" in snakemake.input.keys() else None,
            experiment=snakemake.wildcards.experiment, dataset=snakemake.params.dataset,
            feat=int(snakemake.wildcards.feat), settings=snakemake.params.settings, hyb=snakemake.params.hyb,
            timing=snakemake.params.timing, device=snakemake.params.device, seed=snakemake.params.seed,
            threads=snakemake.threads), output=Path(snakemake.output[0]), timing=snakemake.params.timing,
            preload=lambda: preload(snakemake.threads, Path(snakemake.input.dataset)))
