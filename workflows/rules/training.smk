# Full-graph training (workflows/scripts/training_family.py): the rules every training experiment shares.
# A family's rules file registers one in TRAINING (experiment -> its results folder, config section, datasets
# by slug): families.smk, for each family whose declaration asks for it (Family.workflow, Family.trainings).
# One job per dataset trains and times every contender on all cores (no two timings share the machine),
# then tables (pandas) and a figure (seaborn) per experiment.
import re

if TRAINING:
    TRAINING_BY_FOLDER = {spec["folder"]: experiment for experiment, spec in TRAINING.items()}

    rule training_run:
        output:
            f"{RESULTS}/{{training}}/records/{{training_dataset}}.json",
        log:
            f"{RESULTS}/logs/training_run/{{training}}/{{training_dataset}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/training_run/{{training}}/{{training_dataset}}.tsv"
        wildcard_constraints:
            training="|".join(re.escape(folder) for folder in TRAINING_BY_FOLDER),
            training_dataset="|".join(re.escape(slug) for spec in TRAINING.values() for slug in spec["datasets"]),
        params:
            step="train",
            experiment=lambda wildcards: TRAINING_BY_FOLDER[wildcards.training],
            dataset=lambda wildcards: TRAINING[TRAINING_BY_FOLDER[wildcards.training]]["datasets"][
                wildcards.training_dataset],
            section=lambda wildcards: TRAINING[TRAINING_BY_FOLDER[wildcards.training]]["section"],
            data=config["data"],
        threads: TIMED_THREADS
        script:
            "../scripts/training_family.py"

    localrules: training_tables, training_figures  # tables and figures: on the submitting host

    rule training_tables:
        input:
            records=lambda wildcards: [
                f"{RESULTS}/{wildcards.training}/records/{slug}.json"
                for slug in TRAINING[TRAINING_BY_FOLDER[wildcards.training]]["datasets"]],
        output:
            csv=report(f"{RESULTS}/{{training}}/speedup.csv", category="training",
                       caption="../report/training_table.rst"),
            md=f"{RESULTS}/{{training}}/speedup.md",
            tex=f"{RESULTS}/{{training}}/speedup.tex",
        log:
            f"{RESULTS}/logs/training_tables/{{training}}.log",
        wildcard_constraints:
            training="|".join(re.escape(folder) for folder in TRAINING_BY_FOLDER),
        params:
            step="tables",
            experiment=lambda wildcards: TRAINING_BY_FOLDER[wildcards.training],
            section=lambda wildcards: TRAINING[TRAINING_BY_FOLDER[wildcards.training]]["section"],
        script:
            "../scripts/training_family.py"

    rule training_figures:
        input:
            f"{RESULTS}/{{training}}/speedup.csv",
        output:
            report(f"{RESULTS}/{{training}}/figures/epoch_time.png", category="training",
                   caption="../report/training_figure.rst"),
        log:
            f"{RESULTS}/logs/training_figures/{{training}}.log",
        wildcard_constraints:
            training="|".join(re.escape(folder) for folder in TRAINING_BY_FOLDER),
        params:
            step="figures",
            experiment=lambda wildcards: TRAINING_BY_FOLDER[wildcards.training],
        script:
            "../scripts/training_family.py"
