# Tables (pandas) and figures (seaborn) per benchmark experiment, from its records plus any
# records measured elsewhere (config merge_records). Wrapped in report() for `snakemake --report`.


rule speedup_tables:
    input:
        records=lambda wildcards: record_paths(wildcards.experiment),
        merged=merged_record_paths,
    output:
        csv=report(f"{RESULTS}/{{experiment}}/speedup.csv", category="{experiment}", caption="../report/table.rst"),
        md=f"{RESULTS}/{{experiment}}/speedup.md",
        tex=f"{RESULTS}/{{experiment}}/speedup.tex",
    log:
        f"{RESULTS}/logs/speedup_tables/{{experiment}}.log",
    wildcard_constraints:
        experiment="|".join(BENCH_EXPERIMENTS),
    params:
        settings=lambda wildcards: config["experiments"][wildcards.experiment],
        datasets=lambda wildcards: [name for name, _ in cases(config)],
    script:
        "../scripts/speedup_tables.py"


rule speedup_figures:
    input:
        f"{RESULTS}/{{experiment}}/speedup.csv",
    output:
        bars=report(f"{RESULTS}/{{experiment}}/figures/speedup_bars.png", category="{experiment}",
                    caption="../report/bars.rst"),
        roofline=report(f"{RESULTS}/{{experiment}}/figures/roofline.png", category="{experiment}",
                        caption="../report/roofline.rst"),
    log:
        f"{RESULTS}/logs/speedup_figures/{{experiment}}.log",
    wildcard_constraints:
        experiment="|".join(BENCH_EXPERIMENTS),
    script:
        "../scripts/speedup_figures.py"
