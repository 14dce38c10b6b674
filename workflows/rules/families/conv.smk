# Sparse 3-D convolution (config section conv; workflows/README.md "Sparse convolution"). One job per
# (point cloud, voxel size) voxelises the cloud once, then per layer builds the kernel map (sparsetir's and
# spconv's rules, both timed as set-up), checks every contender (sparsetir's sparse_conv3d per format, spconv
# with all threads and with one, plain torch gather-mm-scatter; TorchSparse and MinkowskiEngine as unavailable
# rows) against a float64 reference and times the correct ones interleaved; then the end-to-end network. A job
# takes all cores, so no two timings share the machine. Then tables (pandas) and a figure (seaborn).
import re

from family_case import check_family_config

CONV = config.get("conv")

if CONV is not None:
    check_family_config("conv", CONV)
    # one job per (cloud, voxel size): kitti-000000-v0.2, lidar_3000-v0.1
    CONV_SCANS = {f"{dataset_slug(cloud)}-v{float(size):g}": (cloud, float(size)) for cloud in CONV["clouds"]
                  for size in CONV["voxel_sizes"]}

    def conv_targets():
        """What `snakemake conv` builds: the tables and the figure (the records come with them)."""
        return [f"{RESULTS}/conv/speedup.{ext}" for ext in ("csv", "md", "tex")] + [
            f"{RESULTS}/conv/figures/conv_speedup.png"
        ]

    FAMILY_TARGETS["conv"] = conv_targets

    rule conv_case:
        output:
            f"{RESULTS}/conv/records/{{conv_scan}}.json",
        log:
            f"{RESULTS}/logs/conv_case/{{conv_scan}}.log",
        wildcard_constraints:
            conv_scan="|".join(re.escape(slug) for slug in CONV_SCANS),
        params:
            family="conv",
            case=lambda wildcards: dict(zip(("cloud", "voxel_size"), CONV_SCANS[wildcards.conv_scan])),
            settings=CONV,
            timing=config["timing"],
            data=config["data"],
            device=config["device"],
            seed=config["seed"],
        threads: TIMED_THREADS
        script:
            "../../scripts/family_case.py"

    localrules: conv_tables, conv_figures  # tables and figures: on the submitting host

    rule conv_tables:
        input:
            records=[f"{RESULTS}/conv/records/{slug}.json" for slug in CONV_SCANS],
        output:
            csv=report(f"{RESULTS}/conv/speedup.csv", category="conv", caption="../../report/conv_table.rst"),
            md=f"{RESULTS}/conv/speedup.md",
            tex=f"{RESULTS}/conv/speedup.tex",
        log:
            f"{RESULTS}/logs/conv_tables.log",
        script:
            "../../scripts/conv_tables.py"

    rule conv_figures:
        input:
            f"{RESULTS}/conv/speedup.csv",
        output:
            report(f"{RESULTS}/conv/figures/conv_speedup.png", category="conv",
                   caption="../../report/conv_figure.rst"),
        log:
            f"{RESULTS}/logs/conv_figures.log",
        script:
            "../../scripts/conv_figures.py"
