"""Workflow step: the machine's copy bandwidth, measured once per run for every SpMM/SDDMM case.

A record's ``copy_bytes_per_s`` (and the tables' DRAM fraction) is the op's minimum bytes over its
median time against this bandwidth. Measured in every case job, it cost a worker several seconds
(a 2x LLC copy timed interleaved under the case's policy, 20 rounds with flushes, plus its buffers);
with the cases timed in several worker processes that was paid once per process. So it is measured
here, under the run's timing policy and thread count, and the case jobs read it
(``run_case.py --bandwidth_json``); a rerun reuses the file as long as it exists.
"""

import sys
from pathlib import Path


def main(*, output: Path, timing: dict, device: str, threads: int) -> dict:
    from sparsetir.bench.threads import configure_threads

    for warning in configure_threads(threads):  # the same thread settings as the case jobs
        print(warning, file=sys.stderr)
    import torch

    torch.set_num_threads(threads)
    from sparsetir.bench.case_runner import measure_bandwidth
    from sparsetir.bench.records import write_json_atomic
    from sparsetir.timing import TimingPolicy

    bandwidth = measure_bandwidth(TimingPolicy.from_mapping(timing), device)
    print(f"copy bandwidth on {device}: {bandwidth['bytes_per_s'] / 1e9:.1f} GB/s ({bandwidth['method']}, "
          f"{bandwidth['bytes'] / 2**20:.0f} MiB moved per copy)", file=sys.stderr, flush=True)
    write_json_atomic(output, bandwidth)
    return bandwidth


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        main(output=Path(snakemake.output[0]), timing=snakemake.params.timing, device=snakemake.params.device,
             threads=snakemake.threads)
