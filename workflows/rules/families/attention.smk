# Block-sparse attention and pruned-weight SpMM (config section attention; workflows/README.md
# "Block-sparse attention"). One job per sequence length times every mask (FlexAttention compiles
# once per shape and process, so its compile is paid once per job and reported in its own column):
# each contender (sparsetir's sparse_attention per format, SDPA with the dense mask, FlexAttention,
# torch's sparse tensors) is checked against a float64 reference, then timed interleaved. One job
# times PrunedBERT's pruned weights (DLMC) in sparse formats against dense MKL. A job takes all
# cores, so no two timings share the machine. Then tables (pandas) and figures (seaborn).
from family_case import check_family_config

ATTENTION = config.get("attention")

if ATTENTION is not None:
    check_family_config("attention", ATTENTION)
    ATTENTION_SEQS = [int(seq) for seq in ATTENTION["seqs"]]
    PRUNEDBERT = ATTENTION.get("prunedbert")

    def attention_targets():
        """What `snakemake attention` builds: the tables and the figures (the records come with them)."""
        return [f"{RESULTS}/attention/speedup.{ext}" for ext in ("csv", "md", "tex")] + [
            f"{RESULTS}/attention/figures/{name}_speedup.png" for name in ("attention", "prunedbert")
        ]

    FAMILY_TARGETS["attention"] = attention_targets

    rule attention_case:
        output:
            f"{RESULTS}/attention/records/seq{{seq}}.json",
        log:
            f"{RESULTS}/logs/attention_case/seq{{seq}}.log",
        wildcard_constraints:
            seq=r"\d+",
        params:
            family="attention",
            case=lambda wildcards: {"seq": int(wildcards.seq)},
            settings=ATTENTION,
            timing=config["timing"],
            data=config["data"],
            device=config["device"],
            seed=config["seed"],
        threads: TIMED_THREADS
        resources:
            gpu=1 if config["device"] == "cuda" else 0,
        script:
            "../../scripts/family_case.py"

    rule attention_prunedbert:
        output:
            f"{RESULTS}/attention/records/prunedbert.json",
        log:
            f"{RESULTS}/logs/attention_prunedbert.log",
        params:
            settings=PRUNEDBERT,
            timing=lambda wildcards: ATTENTION.get("timing") or config["timing"],
            device=config["device"],
            seed=config["seed"],
            data=config["data"],
        threads: TIMED_THREADS
        script:
            "../../scripts/attention_prunedbert.py"

    localrules: attention_tables, attention_figures  # tables and figures: on the submitting host

    rule attention_tables:
        input:
            records=[f"{RESULTS}/attention/records/seq{seq}.json" for seq in ATTENTION_SEQS]
            + ([f"{RESULTS}/attention/records/prunedbert.json"] if PRUNEDBERT else []),
        output:
            csv=report(f"{RESULTS}/attention/speedup.csv", category="attention",
                       caption="../../report/attention_table.rst"),
            md=f"{RESULTS}/attention/speedup.md",
            tex=f"{RESULTS}/attention/speedup.tex",
        log:
            f"{RESULTS}/logs/attention_tables.log",
        params:
            reference=ATTENTION["reference"],
            prunedbert_reference=(PRUNEDBERT or {}).get("reference"),
        script:
            "../../scripts/attention_tables.py"

    rule attention_figures:
        input:
            f"{RESULTS}/attention/speedup.csv",
        output:
            attention=report(f"{RESULTS}/attention/figures/attention_speedup.png", category="attention",
                             caption="../../report/attention_figure.rst"),
            prunedbert=f"{RESULTS}/attention/figures/prunedbert_speedup.png",
        log:
            f"{RESULTS}/logs/attention_figures.log",
        script:
            "../../scripts/attention_figures.py"
