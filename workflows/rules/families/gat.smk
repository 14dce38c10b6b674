# GAT training (config section gat; workflows/README.md "GAT training"): sparsetir's nn.GATConv (the fused
# edge softmax-aggregate op) against PyG's and DGL's GATConv, the GAT paper's 2-layer model from the same
# weights, full graph; the rules are training.smk's (one job per dataset, then tables and a figure).
from training_family import check_training_config

GAT = config.get("gat")

if GAT is not None:
    check_training_config("gat", GAT, "gat")
    TRAINING["gat"] = {"folder": "gat", "section": GAT,
                       "datasets": {dataset_slug(name): name for name in GAT["datasets"]}}

    def gat_targets():
        """What `snakemake gat` builds: the tables and the figure (the records come with them)."""
        return [f"{RESULTS}/gat/speedup.{ext}" for ext in ("csv", "md", "tex")] + [f"{RESULTS}/gat/figures/epoch_time.png"]

    FAMILY_TARGETS["gat"] = gat_targets
