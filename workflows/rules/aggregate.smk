# Tables (pandas), summary.json and figures (seaborn) per benchmark experiment, from its records plus
# any records measured elsewhere (config merge_records); a summary.json for every op family from its
# records; then the report (report.md, report.html) over every experiment's summary.


# Seconds of pandas and seaborn: run on the submitting host, never queued on a cluster.
localrules: speedup_tables, speedup_figures, family_summary, report


rule speedup_tables:
    input:
        records=lambda wildcards: record_paths(wildcards.experiment),
        merged=merged_record_paths,
    output:
        csv=report(f"{RESULTS}/{{experiment}}/speedup.csv", category="{experiment}", caption="../report/table.rst"),
        md=f"{RESULTS}/{{experiment}}/speedup.md",
        tex=f"{RESULTS}/{{experiment}}/speedup.tex",
        summary=f"{RESULTS}/{{experiment}}/summary.json",
    log:
        f"{RESULTS}/logs/speedup_tables/{{experiment}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/speedup_tables/{{experiment}}.tsv"
    wildcard_constraints:
        experiment="|".join(BENCH_EXPERIMENTS),
    params:
        settings=lambda wildcards: config["experiments"][wildcards.experiment],
        datasets=lambda wildcards: [name for name, _ in cases(config)],
    script:
        "../scripts/speedup_tables.py"


rule speedup_figures:
    input:
        csv=f"{RESULTS}/{{experiment}}/speedup.csv",
        summary=f"{RESULTS}/{{experiment}}/summary.json",
    output:
        bars=report(f"{RESULTS}/{{experiment}}/figures/speedup_bars.png", category="{experiment}",
                    caption="../report/bars.rst"),
        roofline=report(f"{RESULTS}/{{experiment}}/figures/roofline.png", category="{experiment}",
                        caption="../report/roofline.rst"),
        svg=[f"{RESULTS}/{{experiment}}/figures/speedup_bars.svg", f"{RESULTS}/{{experiment}}/figures/roofline.svg"],
    log:
        f"{RESULTS}/logs/speedup_figures/{{experiment}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/speedup_figures/{{experiment}}.tsv"
    wildcard_constraints:
        experiment="|".join(BENCH_EXPERIMENTS),
    script:
        "../scripts/speedup_figures.py"


def family_summary_inputs(wildcards):
    """An implemented family's own targets (its records and tables come with them)."""
    return FAMILY_TARGETS[wildcards.family]()


rule family_summary:
    input:
        family_summary_inputs,
    output:
        f"{RESULTS}/{{family}}/summary.json",
    log:
        f"{RESULTS}/logs/family_summary/{{family}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/family_summary/{{family}}.tsv"
    wildcard_constraints:
        family="|".join(sorted(set(FAMILIES) - set(PENDING_EXPERIMENTS))) or "no-family-is-implemented",
    params:
        results=RESULTS,
    script:
        "../scripts/family_summary.py"


rule report:
    input:
        # every experiment's whole target, figures included: the report links the figures (their .svg
        # where present), so it must not be written while they are still being drawn (read when the DAG
        # is built, after every family's rules have registered their targets)
        summaries=[f"{RESULTS}/{experiment}/summary.json" for experiment in ALL_EXPERIMENTS],
        targets=lambda wildcards: [path for experiment in ALL_EXPERIMENTS for path in experiment_targets(experiment)],
    output:
        md=f"{RESULTS}/report.md",
        html=f"{RESULTS}/report.html",
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/report.tsv"
    params:
        results=RESULTS,
        config_hash=CONFIG_HASH,
    script:
        "../scripts/report.py"
