# GraphSAGE training (config section sage; workflows/README.md "GraphSAGE training"). One job per
# dataset (its modes one after the other: full graph, mini-batch) trains every contender (sparsetir's nn.GraphSAGE, PyG SAGEConv on each of its
# CPU structures, DGL SAGEConv) from the same initial weights, interleaved by epoch, for every
# seed; a job takes all cores, so no two timings share the machine. Then tables (pandas) and
# figures (seaborn): ms per epoch, speedups over the best of PyG and DGL, accuracy vs time.
import re

from sage_train import MODES as SAGE_MODES
from sage_train import check_sage_config

SAGE = config.get("sage")

if SAGE is not None:
    check_sage_config(SAGE)
    SAGE_DATASETS = {dataset_slug(name): name for mode in SAGE_MODES for name in SAGE[mode]["datasets"]}
    SAGE_RECORDS = [f"{RESULTS}/sage/records/{slug}.json" for slug in SAGE_DATASETS]

    def sage_targets():
        """What `snakemake sage` builds: the tables and the figures (the records come with them)."""
        return [f"{RESULTS}/sage/speedup.{ext}" for ext in ("csv", "md", "tex")] + [
            f"{RESULTS}/sage/figures/{name}.png" for name in ("epoch_time", "accuracy_vs_time")
        ]

    FAMILY_TARGETS["sage"] = sage_targets

    rule sage_train:
        output:
            f"{RESULTS}/sage/records/{{sage_dataset}}.json",
        log:
            f"{RESULTS}/logs/sage_train/{{sage_dataset}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/sage_train/{{sage_dataset}}.tsv"
        wildcard_constraints:
            sage_dataset="|".join(re.escape(slug) for slug in SAGE_DATASETS),
        params:
            dataset=lambda wildcards: SAGE_DATASETS[wildcards.sage_dataset],
            sage=SAGE,
            data=config["data"],
        threads: TIMED_THREADS
        script:
            "../../scripts/sage_train.py"

    localrules: sage_tables, sage_figures  # tables and figures: on the submitting host

    rule sage_tables:
        input:
            records=SAGE_RECORDS,
        output:
            csv=report(f"{RESULTS}/sage/speedup.csv", category="sage", caption="../../report/sage_table.rst"),
            md=f"{RESULTS}/sage/speedup.md",
            tex=f"{RESULTS}/sage/speedup.tex",
        log:
            f"{RESULTS}/logs/sage_tables.log",
        benchmark:
            f"{RESULTS}/benchmarks/sage_tables.tsv"
        params:
            targets=SAGE["targets"],
        script:
            "../../scripts/sage_tables.py"

    rule sage_figures:
        input:
            f"{RESULTS}/sage/speedup.csv",
        output:
            epoch_time=report(f"{RESULTS}/sage/figures/epoch_time.png", category="sage",
                              caption="../../report/sage_figure.rst"),
            accuracy=report(f"{RESULTS}/sage/figures/accuracy_vs_time.png", category="sage",
                            caption="../../report/sage_figure.rst"),
        log:
            f"{RESULTS}/logs/sage_figures.log",
        benchmark:
            f"{RESULTS}/benchmarks/sage_figures.tsv"
        script:
            "../../scripts/sage_figures.py"
