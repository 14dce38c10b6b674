"""Workflow step: build the GPU bundle (``sparsetir.bench.bundle.build_bundle``) from config ``bundle``.

Datasets in the config's ``hyb`` table get the paper's setting as an extra hyb candidate; a section
``bundle.<family>`` adds that family's candidates (its bundle part, ``sparsetir.bench.bundle.parts``: the
module ``sparsetir.bench.bundle.<family>``).
"""


def main(output: str, settings: dict | None, hyb_table: dict, seed: int) -> dict:
    if not settings:
        raise ValueError("the config has no bundle section (see workflows/config/default.yaml)")
    from harness_config import hyb_format

    from sparsetir.bench.bundle import build_bundle
    from sparsetir.bench.bundle.parts import bundle_parts

    extra = {name: hyb_format(name, hyb_table) for name in settings["datasets"] if name in hyb_table}
    return build_bundle(output, settings["datasets"], settings["feats"], target=settings["target"],
                        limit=settings["limit"], hyb_formats=extra, seed=seed,
                        time_limit_s=settings.get("time_limit_s"), max_bytes=int(settings["max_mib"] * 2**20),
                        wheel=settings.get("wheel"), **{name: settings.get(name) for name in bundle_parts()})


if "snakemake" in globals():
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        main(snakemake.output[0], snakemake.params.bundle, snakemake.params.hyb, snakemake.params.seed)
