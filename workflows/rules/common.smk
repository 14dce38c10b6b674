# Shared names: the checked config, dataset slugs, and each experiment's target files.
import glob
import sys

sys.path.insert(0, str(Path(workflow.basedir) / "workflows" / "scripts"))
from cluster_preflight import check_slurm_run
from harness_config import (FAMILIES, cases, check_config, dataset_names, dataset_slug, pending_families, uses_tuning,
                            workflow_families)
from sparsetir.bench.report.document import config_hash

check_config(config, workflow.config_settings.configfiles)  # also resolves results and data.mirror "auto"

RESULTS = config["results"]
# Every dataset's routes, asked before any job runs (dry runs included): one table on standard output;
# a real run keeps it in <results>/data_availability.json for the end-of-run screen (data_preflight.py).
from data_preflight import keep as keep_data_survey, preflight

DATA_SURVEY = preflight(config)
# A timed job has its cores to itself: locally every core of --cores; on a cluster (no --cores) the CPUs
# the profile's max-threads grants (the SLURM plugin asks --cpus-per-task=threads, profiles/slurm). The
# rules never read workflow.cores, which a run without --cores leaves undefined.
TIMED_THREADS = workflow.resource_settings.cores or workflow.resource_settings.max_threads or 1


onstart:
    # on SLURM, before anything is submitted: every job fits a node of its partition and the plugin can see
    # jobs finish (cluster_preflight.py); a clear error otherwise
    slurm_summary = check_slurm_run(workflow)
    if slurm_summary:
        print(slurm_summary, flush=True)
    keep_data_survey(DATA_SURVEY, RESULTS, config["data"])
    # the machine check before any timing (sparsetir.timing.machine): printed, kept as <results>/machine.json;
    # with timing.strict a busy machine stops the run here, naming what is busy
    shell(f"{sys.executable} -m sparsetir.timing --json {RESULTS}/machine.json"
          + (" --strict" if config["timing"].get("strict") else ""))


CONFIG_HASH = config_hash(config)
DATASETS = dataset_names(config)  # slug -> registry name or generator spec
BENCH_EXPERIMENTS = tuple(config["experiments"])
ALL_EXPERIMENTS = BENCH_EXPERIMENTS + FAMILIES
# families.smk adds family -> function returning its target files, for every registered family with a
# workflow (Family.workflow) and a config section; the Snakefile includes it before targets.smk makes the targets.
FAMILY_TARGETS = {}
# experiment -> {"folder", "section", "datasets"}: the training experiments families.smk registers (training.smk)
TRAINING = {}
PENDING_EXPERIMENTS = pending_families(config, workflow_families())


def record_paths(experiment):
    """The per-case record files of a benchmark experiment."""
    return [f"{RESULTS}/{experiment}/records/{dataset_slug(name)}/feat{feat}.json" for name, feat in cases(config)]


def merged_record_paths(wildcards=None):
    """Records measured elsewhere (config merge_records globs), merged into the tables."""
    return sorted({path for pattern in config["merge_records"] for path in glob.glob(pattern)})


def experiment_targets(experiment):
    """What the target named after ``experiment`` builds (its summary.json included)."""
    tables = [f"{RESULTS}/{experiment}/speedup.{ext}" for ext in ("csv", "md", "tex")]
    summary = [f"{RESULTS}/{experiment}/summary.json"]
    if experiment in PENDING_EXPERIMENTS:
        return tables + summary
    if experiment in FAMILY_TARGETS:
        return FAMILY_TARGETS[experiment]() + summary
    return tables + summary + [f"{RESULTS}/{experiment}/figures/speedup_bars.png",
                               f"{RESULTS}/{experiment}/figures/roofline.png"]

