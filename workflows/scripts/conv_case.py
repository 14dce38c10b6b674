"""Workflow step: sparse 3-D convolution on one voxelised cloud, every layer and the network; one records file.

``sparsetir.bench.families.conv.benchmark_scan`` does the work: the cloud is voxelised once, each layer's
kernel map is built by sparsetir and by spconv (both timed, as set-up), every contender (the
configured sparsetir formats, the configured baselines of ``baselines/conv.py``) is checked
against the float64 reference before timing, and the correct ones are timed interleaved; then
the end-to-end network. A cloud no route provides gives ``unavailable`` records. Spin limits and
thread counts are set before torch or TVM load.

:func:`check_conv_config` is what the rules file (``rules/families/conv.smk``) checks before any
job: the schema cannot parse layer strings or know which clouds exist.
"""


import sys
from pathlib import Path


def scan_slug(cloud: str, voxel_size: float) -> str:
    """The file name of one (cloud, voxel size) job: ``kitti-000000-v0.2``, ``lidar_3000-v0.1``."""
    from harness_config import dataset_slug

    return f"{dataset_slug(cloud)}-v{float(voxel_size):g}"


def check_conv_config(section: dict) -> dict:
    """Check the config's ``conv`` section (clouds, layers, network, contenders); return it or raise ``ValueError``."""
    from sparsetir.bench.families.conv import parse_layer
    from sparsetir.data.lidar_scan import check_cloud_name

    for name in section["clouds"]:
        try:
            check_cloud_name(name)
        except ValueError as error:
            raise ValueError(f"config conv.clouds: {error}") from None
    for key, network in (("layers", False), ("network", True)):
        for text in section.get(key) or ():
            try:
                parse_layer(text, network=network)
            except ValueError as error:
                raise ValueError(f"config conv.{key}: {error}") from None
    chained = None
    for text in section.get("network") or ():
        spec = parse_layer(text, network=True)
        if chained is not None and spec.c_in != chained:
            raise ValueError(f"config conv.network: layer {text} takes {spec.c_in} channels after a layer giving "
                             f"{chained}")
        if spec.stride not in (1, 2):
            raise ValueError(f"config conv.network: layer {text}: the network's strides are 1 or 2")
        chained = spec.c_out
    from harness_config import check_contenders

    check_contenders("conv", "conv", section)
    return section


def main(*, cloud: str, voxel_size: float, output: Path, settings: dict, data: dict, seed: int, threads: int,
         timing: dict | None = None) -> list[dict]:
    """Benchmark ``cloud`` at ``voxel_size`` with the ``conv`` section's contenders; its ``timing`` (else the
    config's top-level ``timing``) is the policy, ``network_timing`` the network's."""
    from prepare_dataset import configure_data_routes

    from sparsetir.bench.records import write_json_atomic
    from sparsetir.bench.threads import configure_threads

    configure_data_routes(data)
    for warning in configure_threads(threads):  # spin limits and threads, before torch/TVM load
        print(warning, file=sys.stderr)
    import torch

    torch.set_num_threads(threads)
    from sparsetir.bench.families.conv import FAMILY, benchmark_scan
    from sparsetir.timing import DEFAULT, TimingPolicy

    policy = TimingPolicy.from_mapping(settings.get("timing") or timing, base=DEFAULT)
    network_policy = TimingPolicy.from_mapping(settings["network_timing"], base=policy) \
        if settings.get("network_timing") else policy
    contenders = FAMILY.contenders(settings["sparsetir"], settings["baselines"],
                                   tune_budget_s=settings.get("tune_budget_s"))
    records = benchmark_scan(cloud, voxel_size, contenders, layers=settings.get("layers") or (),
                             network=settings.get("network") or (), kernel_size=settings.get("kernel_size", 3),
                             dilation=settings.get("dilation", 1), timing=policy, network_timing=network_policy,
                             seed=seed, threads=threads,
                             progress=lambda message: print(message, file=sys.stderr, flush=True))
    print(FAMILY.format_records(records), file=sys.stderr, flush=True)
    write_json_atomic(output, records)
    return records


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from case_workers import run_step
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        run_step(__file__, main, dict(
            cloud=snakemake.params.cloud, voxel_size=snakemake.params.voxel_size, settings=snakemake.params.settings,
            data=snakemake.params.data, seed=snakemake.params.seed, threads=snakemake.threads,
            timing=snakemake.params.timing), output=Path(snakemake.output[0]),
            timing=snakemake.params.settings.get("timing") or snakemake.params.timing)
