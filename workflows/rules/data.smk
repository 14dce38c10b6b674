# Datasets: resolve (embedded data/ -> cache -> mirror -> download) or generate, then store the
# float32 CSR once for all cases. A dataset no route provides gets status "unavailable".


rule prepare_dataset:
    output:
        f"{RESULTS}/datasets/{{dataset}}.json",
    log:
        f"{RESULTS}/logs/prepare_dataset/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prepare_dataset/{{dataset}}.tsv"
    params:
        name=lambda wildcards: DATASETS[wildcards.dataset],
        data=config["data"],
        seed=config["seed"],
    threads: 1
    script:
        "../scripts/prepare_dataset.py"
