# R-GCN inference (config section rgcn; workflows/README.md "R-GCN inference"). One job per dataset
# builds the inputs once, checks every contender (sparsetir's nn.RGCN, PyG RGCNConv/FastRGCNConv,
# DGL RelGraphConv, plain torch; Graphiler as an unavailable row) against a float64 reference and
# times the correct ones interleaved; it takes all cores, so no two timings share the machine. A
# second job per dataset measures each timed contender's peak memory in a fresh process (one
# thread: memory jobs may run side by side). Then tables (pandas) and a figure (seaborn).
import re

from family_case import check_family_config

RGCN = config.get("rgcn")

if RGCN is not None:
    check_family_config("rgcn", RGCN)
    RGCN_DATASETS = {dataset_slug(name): name for name in RGCN["datasets"]}  # slug -> name or spec

    if RGCN.get("training") is not None:  # entity-classification training: training.smk's rules
        from training_family import check_training_config

        check_training_config("rgcn-train", RGCN["training"], "rgcn.training")
        TRAINING["rgcn-train"] = {"folder": "rgcn/training", "section": RGCN["training"],
                                  "datasets": {dataset_slug(name): name for name in RGCN["training"]["datasets"]}}

    def rgcn_targets():
        """What `snakemake rgcn` builds: the tables and the figure (the records come with them), and with
        rgcn.training the training tables and figure under rgcn/training/."""
        training = [f"{RESULTS}/rgcn/training/speedup.{ext}" for ext in ("csv", "md", "tex")] + [
            f"{RESULTS}/rgcn/training/figures/epoch_time.png"] if "rgcn-train" in TRAINING else []
        return [f"{RESULTS}/rgcn/speedup.{ext}" for ext in ("csv", "md", "tex")] + [
            f"{RESULTS}/rgcn/figures/rgcn_inference.png"
        ] + training

    FAMILY_TARGETS["rgcn"] = rgcn_targets

    rule rgcn_case:
        output:
            f"{RESULTS}/rgcn/timed/{{rgcn_dataset}}.json",
        log:
            f"{RESULTS}/logs/rgcn_case/{{rgcn_dataset}}.log",
        wildcard_constraints:
            rgcn_dataset="|".join(re.escape(slug) for slug in RGCN_DATASETS),
        params:
            family="rgcn",
            case=lambda wildcards: {"dataset": RGCN_DATASETS[wildcards.rgcn_dataset]},
            settings=RGCN,
            timing=config["timing"],
            data=config["data"],
            device=config["device"],
            seed=config["seed"],
        threads: TIMED_THREADS
        script:
            "../../scripts/family_case.py"

    rule rgcn_memory:
        input:
            f"{RESULTS}/rgcn/timed/{{rgcn_dataset}}.json",
        output:
            f"{RESULTS}/rgcn/records/{{rgcn_dataset}}.json",
        log:
            f"{RESULTS}/logs/rgcn_memory/{{rgcn_dataset}}.log",
        wildcard_constraints:
            rgcn_dataset="|".join(re.escape(slug) for slug in RGCN_DATASETS),
        params:
            settings=RGCN,
            data=config["data"],
        threads: 1
        script:
            "../../scripts/rgcn_memory.py"

    localrules: rgcn_tables, rgcn_figures  # tables and figures: on the submitting host

    rule rgcn_tables:
        input:
            records=[f"{RESULTS}/rgcn/records/{slug}.json" for slug in RGCN_DATASETS],
        output:
            csv=report(f"{RESULTS}/rgcn/speedup.csv", category="rgcn", caption="../../report/rgcn_table.rst"),
            md=f"{RESULTS}/rgcn/speedup.md",
            tex=f"{RESULTS}/rgcn/speedup.tex",
        log:
            f"{RESULTS}/logs/rgcn_tables.log",
        params:
            datasets=RGCN["datasets"],
        script:
            "../../scripts/rgcn_tables.py"

    rule rgcn_figures:
        input:
            f"{RESULTS}/rgcn/speedup.csv",
        output:
            report(f"{RESULTS}/rgcn/figures/rgcn_inference.png", category="rgcn",
                   caption="../../report/rgcn_figure.rst"),
        log:
            f"{RESULTS}/logs/rgcn_figures.log",
        script:
            "../../scripts/rgcn_figures.py"
