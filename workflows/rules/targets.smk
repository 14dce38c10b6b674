# One target per experiment (snakemake spmm, sddmm, or a family's name), made after every rules file is included,
# so families.smk has filled FAMILY_TARGETS.


for _experiment in ALL_EXPERIMENTS:

    rule:
        name:
            _experiment
        input:
            experiment_targets(_experiment),
