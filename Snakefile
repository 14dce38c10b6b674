"""sparsetir benchmark workflow (see workflows/README.md).

    snakemake --cores 2                          # all: every experiment (default config)
    snakemake --cores 2 spmm                     # one experiment: spmm, sddmm, attention, conv, rgcn, sage, gat
    snakemake --cores 2 --configfile workflows/config/smoke.yaml
    # every run of `all` ends with results/report.md and results/report.html (tables, figures, pending, provenance)
"""

import sys
from pathlib import Path

from snakemake.utils import min_version, validate

min_version("8.0")

# A --configfile replaces the default instead of being merged into it (merging would leak keys);
# --config key=value overrides apply on top of either.
if not workflow.config_settings.configfiles:
    configfile: Path(workflow.basedir) / "workflows" / "config" / "default.yaml"

sys.path.insert(0, str(Path(workflow.basedir) / "workflows" / "scripts"))
from harness_config import derived_schema  # noqa: E402 - the scripts' folder is on the path only now

validate(config, derived_schema(Path(workflow.basedir) / "workflows" / "config" / "schema.yaml"))


include: "workflows/rules/common.smk"


rule all:
    input:
        lambda wildcards: [target for experiment in ALL_EXPERIMENTS for target in experiment_targets(experiment)],
        f"{RESULTS}/report.md",


include: "workflows/rules/data.smk"
include: "workflows/rules/bench.smk"
include: "workflows/rules/aggregate.smk"
include: "workflows/rules/families.smk"  # every registered family's rules

include: "workflows/rules/training.smk"
include: "workflows/rules/pending.smk"
include: "workflows/rules/bundle.smk"
include: "workflows/rules/targets.smk"
