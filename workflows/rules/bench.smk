# One job per (experiment, dataset, feature size): every contender prepared, checked against a
# float64 reference and timed in one process (interleaved, cache flushed), one record each.
# A job takes all cores, so timings never share the machine with another job.


rule run_case:
    input:
        f"{RESULTS}/datasets/{{dataset}}.json",
    output:
        f"{RESULTS}/{{experiment}}/records/{{dataset}}/feat{{feat}}.json",
    wildcard_constraints:
        experiment="|".join(BENCH_EXPERIMENTS),
        feat=r"\d+",
    params:
        settings=lambda wildcards: config["experiments"][wildcards.experiment],
        hyb=config["hyb"],
        timing=config["timing"],
        device=config["device"],
        seed=config["seed"],
        dataset=lambda wildcards: DATASETS[wildcards.dataset],
    threads: max(1, workflow.cores or 1)
    resources:
        gpu=1 if config["device"] == "cuda" else 0,
    script:
        "../scripts/run_case.py"
