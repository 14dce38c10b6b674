"""Workflow step: PrunedBERT, ``W @ X`` for DLMC's pruned transformer weights; write records.

Each weight (config ``attention.prunedbert.matrices``, read through ``sparsetir.data.masks.pruned_weight``:
DLMC's, or ``block-pruned/<rows>x<cols>/<block>/<sparsity>``, whole blocks kept)
gets seeded values and a seeded ``X`` of ``tokens`` columns; ``ops.spmm`` in each configured format
(CSR and the block formats BSR, DBSR, SR-BCRS) and the baselines (dense ``torch.mm``: MKL; torch
CSR) are checked against float64 and timed interleaved (``sparsetir.bench.families.attention``).
"""


import sys
from pathlib import Path


def main(*, output: Path, settings: dict, timing: dict, device: str, seed: int, threads: int,
         data: dict | None = None) -> list[dict]:
    from sparsetir.bench.threads import configure_threads

    if data is not None:  # the config's dataset routes (cache, mirror, downloads), as prepare_dataset uses them
        from prepare_dataset import configure_data_routes

        configure_data_routes(data)

    for warning in configure_threads(threads):
        print(warning, file=sys.stderr)
    import torch

    torch.set_num_threads(threads)
    from sparsetir.bench.families.attention import prunedbert_case
    from sparsetir.bench.records import make_record, provenance, write_json_atomic
    from sparsetir.data import masks
    from sparsetir.timing import TimingPolicy

    policy = TimingPolicy.from_mapping(timing)
    records = []
    for name in settings["matrices"]:
        case = name.removeprefix("dlmc/")
        try:
            pattern = masks.pruned_weight(name)
        except Exception as error:  # noqa: BLE001 - a weight no route provides gets an unavailable row
            print(f"prunedbert {case}: unavailable: {error}", file=sys.stderr)
            records.append({**make_record(experiment="prunedbert", op="spmm", device=device, dataset=case,
                                          feat=settings["tokens"], contender="*", status="unavailable",
                                          reason=f"{type(error).__name__}: {error}"[:300],
                                          provenance=provenance(device=device, flush=policy.flush)),
                            "case": case, "setting": {}, "kind": "*"})
            continue
        print(f"prunedbert {case}: {pattern.shape[0]}x{pattern.shape[1]}, {pattern.nnz:,} non-zeros "
              f"({100 * (1 - pattern.nnz / (pattern.shape[0] * pattern.shape[1])):.1f}% sparse), "
              f"{settings['tokens']} tokens", file=sys.stderr, flush=True)
        case_records = prunedbert_case(case=case, matrix=pattern, tokens=settings["tokens"],
                                       formats=settings["sparsetir"], baselines=settings["baselines"],
                                       timing=policy, device=device, seed=seed)
        for record in case_records:
            outcome = f"{record['stats']['median'] * 1e3:9.3f} ms" if record["status"] == "ok" else record["reason"]
            print(f"  {record['contender']:<24} {outcome}", file=sys.stderr, flush=True)
        records += case_records
    write_json_atomic(output, records)
    return records


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from case_workers import run_step
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        run_step(__file__, main, dict(
            settings=snakemake.params.settings, timing=snakemake.params.timing, device=snakemake.params.device,
            seed=snakemake.params.seed, threads=snakemake.threads, data=snakemake.params.data),
            output=Path(snakemake.output[0]), timing=snakemake.params.timing)
