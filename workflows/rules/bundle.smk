# Tune on a CPU host, measure on a GPU host (workflows/README.md "GPU bundle: tune here, measure there").
# gpu_bundle compiles the config's SpMM candidates (real device code) into one folder of at most
# bundle.max_mib to carry to the GPU host; gpu_ingest reads the records that came back
# (--config bundle_records=<folder>), fills the tuning database and results/reference/gpu/.


# gpu_ingest reads a folder on the submitting host; gpu_bundle compiles, so it may go to the cluster.
localrules: gpu_ingest


rule gpu_bundle:
    output:
        directory(f"{RESULTS}/gpu-bundle"),
    log:
        f"{RESULTS}/logs/gpu_bundle.log",
    params:
        bundle=config.get("bundle"),
        hyb=config["hyb"],
        seed=config["seed"],
    threads: 1
    script:
        "../scripts/gpu_bundle.py"


def bundle_records_folder(wildcards):
    """The records folder a GPU run brought back (config bundle_records), or a clear error."""
    folder = config.get("bundle_records")
    if not folder:
        raise ValueError("gpu_ingest needs the records folder: snakemake gpu_ingest --config bundle_records=<folder>")
    return folder


rule gpu_ingest:
    input:
        records=bundle_records_folder,
    output:
        f"{RESULTS}/gpu-ingest/summary.json",
    log:
        f"{RESULTS}/logs/gpu_ingest.log",
    params:
        reference_dir="results/reference/gpu",
    threads: 1
    script:
        "../scripts/gpu_ingest.py"
