# One job per (experiment, dataset, feature size): every contender prepared, checked against a
# float64 reference and timed in one process (interleaved, cache flushed), one record each.
# A job takes all cores, so timings never share the machine with another job. A "tuned"
# sparsetir contender first gets its own tune job (compile in workers, then measure), whose
# result is cached in the tuning database as well as in <experiment>/tuned/.


rule tune_case:
    input:
        f"{RESULTS}/datasets/{{dataset}}.json",
    output:
        f"{RESULTS}/{{experiment}}/tuned/{{dataset}}/feat{{feat}}.json",
    log:
        f"{RESULTS}/logs/tune_case/{{experiment}}/{{dataset}}/feat{{feat}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/tune_case/{{experiment}}/{{dataset}}/feat{{feat}}.tsv"
    wildcard_constraints:
        experiment="|".join(BENCH_EXPERIMENTS),
        feat=r"\d+",
    params:
        tuning=config["tuning"],
    threads: TIMED_THREADS
    script:
        "../scripts/tune_case.py"


rule copy_bandwidth:
    # once per run (a rerun keeps the file): every case's DRAM fraction is against this bandwidth
    output:
        f"{RESULTS}/copy_bandwidth.json",
    log:
        f"{RESULTS}/logs/copy_bandwidth.log",
    params:
        timing=config["timing"],
        device=config["device"],
    threads: TIMED_THREADS
    resources:
        gpu=1 if config["device"] == "cuda" else 0,
    script:
        "../scripts/copy_bandwidth.py"


def run_case_inputs(wildcards):
    """The prepared dataset, the run's copy bandwidth, and the tuned configuration when the experiment
    has a "tuned" contender."""
    inputs = {"dataset": f"{RESULTS}/datasets/{wildcards.dataset}.json", "bandwidth": f"{RESULTS}/copy_bandwidth.json"}
    if uses_tuning(config["experiments"][wildcards.experiment]):
        inputs["tuned"] = f"{RESULTS}/{wildcards.experiment}/tuned/{wildcards.dataset}/feat{wildcards.feat}.json"
    return inputs


rule run_case:
    input:
        unpack(run_case_inputs),
    output:
        f"{RESULTS}/{{experiment}}/records/{{dataset}}/feat{{feat}}.json",
    log:
        f"{RESULTS}/logs/run_case/{{experiment}}/{{dataset}}/feat{{feat}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/run_case/{{experiment}}/{{dataset}}/feat{{feat}}.tsv"
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
    threads: TIMED_THREADS
    resources:
        gpu=1 if config["device"] == "cuda" else 0,
    script:
        "../scripts/run_case.py"
