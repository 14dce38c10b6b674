# Every experiment family the harness registers (sparsetir.bench.families; workflows/README.md per family),
# one rule set read from the registry: a family with workflow "cases" and a config section gets
#   <family>_<case_step>   one job per case (Family.workflow_cases) writing <family>/<case_folder>/<case>.json:
#                          every contender checked against a float64 reference, the correct ones timed
#                          interleaved; it takes all cores, so no two timings share the machine
#   <family>_<finish_step> (where declared) a one-thread job per case turning that file into records/<case>.json
#   <family>_<extra>       a job per extra (Family.workflow_extras), writing records/<extra>.json
#   <family>_tables, <family>_figures  tables (pandas) and figures (seaborn) on the submitting host
# and one with workflow "training" (or a section key in Family.trainings) gets training.smk's rules.
# The rule names, outputs and logs are the family's own; the scripts ask the family what to run.
import re

from family_case import check_family_config
from training_family import check_training_config

from sparsetir.bench.families import families as registered_families


def _tables(folder):
    return [f"{RESULTS}/{folder}/speedup.{ext}" for ext in ("csv", "md", "tex")]


def _training(experiment, folder, section, where):
    """Register a training experiment for training.smk; its targets."""
    check_training_config(experiment, section, where)
    TRAINING[experiment] = {"folder": folder, "section": section,
                            "datasets": {dataset_slug(name): name for name in section["datasets"]}}
    return _tables(folder) + [f"{RESULTS}/{folder}/figures/epoch_time.png"]


def _targets(name, family, trainings):
    """What `snakemake <family>` builds: the tables and the figures (the records come with them)."""
    figures = [f"{RESULTS}/{name}/figures/{file}" for file in family.figures.values()]
    return lambda: _tables(name) + figures + trainings


def _lookup(table):
    return lambda wildcards: table[wildcards.case]


for _name, _family in registered_families().items():
    _section = config.get(_name)
    if _family.workflow is None or _section is None:
        continue
    if _family.workflow == "training":
        FAMILY_TARGETS[_name] = (lambda targets: lambda: targets)(_training(_name, _name, _section, _name))
        continue
    check_family_config(_name, _section)
    _trainings = [target for key, trainer in _family.trainings.items() if _section.get(key) is not None
                  for target in _training(trainer.name, f"{_name}/{key}", _section[key], f"{_name}.{key}")]
    FAMILY_TARGETS[_name] = _targets(_name, _family, _trainings)
    _cases = _family.workflow_cases(_section)
    _extras = _family.workflow_extras(_section)
    _case_rule = f"{_name}_{_family.case_step}"

    rule:
        name:
            _case_rule
        output:
            f"{RESULTS}/{_name}/{_family.case_folder}/{{case}}.json",
        log:
            f"{RESULTS}/logs/{_case_rule}/{{case}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/{_case_rule}/{{case}}.tsv"
        wildcard_constraints:
            case="|".join(re.escape(slug) for slug in _cases) or "no-case",
        params:
            family=_name,
            step="case",
            case=_lookup(_cases),
            settings=_section,
            timing=config["timing"],
            data=config["data"],
            device=config["device"],
            seed=config["seed"],
        threads: TIMED_THREADS
        resources:
            gpu=1 if config["device"] == "cuda" else 0,
        script:
            "../scripts/family_case.py"

    if _family.finish_step is not None:

        rule:
            name:
                f"{_name}_{_family.finish_step}"
            input:
                f"{RESULTS}/{_name}/{_family.case_folder}/{{case}}.json",
            output:
                f"{RESULTS}/{_name}/records/{{case}}.json",
            log:
                f"{RESULTS}/logs/{_name}_{_family.finish_step}/{{case}}.log",
            wildcard_constraints:
                case="|".join(re.escape(slug) for slug in _cases) or "no-case",
            params:
                family=_name,
                step="finish",
                settings=_section,
                data=config["data"],
            threads: 1
            script:
                "../scripts/family_case.py"

    for _extra in _extras:

        rule:
            name:
                f"{_name}_{_extra}"
            output:
                f"{RESULTS}/{_name}/records/{_extra}.json",
            log:
                f"{RESULTS}/logs/{_name}_{_extra}.log",
            params:
                family=_name,
                step="extra",
                extra=_extra,
                settings=_section,
                timing=config["timing"],
                data=config["data"],
                device=config["device"],
                seed=config["seed"],
            threads: TIMED_THREADS
            resources:
                gpu=1 if config["device"] == "cuda" else 0,
            script:
                "../scripts/family_case.py"

    rule:
        name:
            f"{_name}_tables"
        localrule: True
        input:
            records=[f"{RESULTS}/{_name}/records/{slug}.json" for slug in [*_cases, *_extras]],
        output:
            csv=report(f"{RESULTS}/{_name}/speedup.csv", category=_name, caption=f"../report/{_name}_table.rst"),
            md=f"{RESULTS}/{_name}/speedup.md",
            tex=f"{RESULTS}/{_name}/speedup.tex",
        log:
            f"{RESULTS}/logs/{_name}_tables.log",
        benchmark:
            f"{RESULTS}/benchmarks/{_name}_tables.tsv"
        params:
            family=_name,
            step="tables",
            settings=_section,
        script:
            "../scripts/family_report.py"

    rule:
        name:
            f"{_name}_figures"
        localrule: True
        input:
            f"{RESULTS}/{_name}/speedup.csv",
        output:
            **{key: report(f"{RESULTS}/{_name}/figures/{file}", category=_name, caption=f"../report/{_name}_figure.rst")
               for key, file in _family.figures.items()},
        log:
            f"{RESULTS}/logs/{_name}_figures.log",
        benchmark:
            f"{RESULTS}/benchmarks/{_name}_figures.tsv"
        params:
            family=_name,
            step="figures",
        script:
            "../scripts/family_report.py"
