# One target per experiment (snakemake spmm, ..., rgcn), made after every rules file is included,
# so the op families' files (rules/families/*.smk) have filled FAMILY_TARGETS.


for _experiment in ALL_EXPERIMENTS:

    rule:
        name:
            _experiment
        input:
            experiment_targets(_experiment),
