"""The workflow's configuration beyond its JSON schema: dataset slugs, cases, formats, checks.

The Snakefile validates a config file against ``workflows/config/schema.yaml`` (types, keys)
and then calls :func:`check_config`, which checks what a schema cannot (known dataset names,
generator specs, hyb bucket order, references) and raises ``ValueError`` naming the problem.
"""


from sparsetir.data import dataset_slug

PENDING_EXPERIMENTS = ("attention", "conv", "rgcn", "sage")
BEST_CPU = "best-cpu-library"
__all__ = ["BEST_CPU", "PENDING_EXPERIMENTS", "cases", "check_config", "dataset_names", "dataset_slug",
           "hyb_format", "sparsetir_formats", "uses_tuning"]


def hyb_format(dataset: str, hyb_table: dict) -> str:
    """The paper's hyb format string for ``dataset`` (``hyb:<c>:<w1,w2,...>``), else plain ``hyb``."""
    setting = hyb_table.get(dataset)
    if setting is None:
        return "hyb"
    return f"hyb:{setting['col_parts']}:{','.join(str(width) for width in setting['buckets'])}"


TUNED = "tuned"  # a sparsetir contender spec: the configuration the tune step found


def uses_tuning(experiment: dict) -> bool:
    return TUNED in experiment["sparsetir"].values()


def sparsetir_formats(experiment: dict, dataset: str, hyb_table: dict, tuned: dict | None = None) -> dict:
    """Contender name -> spec for one dataset: a format string ("hyb" resolved through the hyb
    table), or for "tuned" the tune step's outcome (``{"config", "tune_s"}`` or ``{"error"}``)."""
    specs = {}
    for name, fmt in experiment["sparsetir"].items():
        if fmt == TUNED:
            if tuned is None:
                raise ValueError(f"contender {name!r} is 'tuned' but no tuning result was given")
            specs[name] = ({"config": tuned["config"], "tune_s": tuned["tune_s"]} if tuned["status"] == "ok"
                           else {"error": f"unavailable: tuning: {tuned['reason']}"})
        else:
            specs[name] = hyb_format(dataset, hyb_table) if fmt == "hyb" else fmt
    return specs


def cases(config: dict) -> list[tuple[str, int]]:
    """Every (dataset, feat) the benchmark experiments run: datasets x feats, then the scale curve."""
    pairs = [(name, feat) for name in config["datasets"] for feat in config["feats"]]
    curve = config.get("scale_curve") or {}
    pairs += [(name, feat) for name in curve.get("datasets", []) for feat in curve.get("feats", [])]
    return list(dict.fromkeys(pairs))


def dataset_names(config: dict) -> dict[str, str]:
    """Slug -> dataset name (or generator spec) for every dataset the config uses."""
    slugs: dict[str, str] = {}
    for name, _feat in cases(config):
        slug = dataset_slug(name)
        if slugs.setdefault(slug, name) != name:
            raise ValueError(f"datasets {slugs[slug]!r} and {name!r} map to the same file name {slug!r}")
    return slugs


def check_config(config: dict) -> dict:
    """Check what the schema cannot; return ``config`` or raise ``ValueError`` naming the problem."""
    from sparsetir.data import is_generated, names
    from sparsetir.data.generators import parse_spec

    known = set(names())
    for name in dict.fromkeys(name for name, _ in cases(config)):
        if is_generated(name):
            try:
                parse_spec(name)
            except ValueError as err:
                raise ValueError(f"config datasets: {err}") from None
        elif name not in known:
            raise ValueError(f"config datasets: unknown dataset {name!r}; known: {', '.join(sorted(known))}, "
                             "or a generator spec (rmat:<scale>:<edge_factor>, powerlaw:<n>:<deg>:<exp>, "
                             "synthetic:<m>x<n>:<density>)")
    dataset_names(config)
    for dataset, setting in config["hyb"].items():
        if dataset not in known:
            raise ValueError(f"config hyb: unknown dataset {dataset!r}")
        buckets = setting["buckets"]
        if sorted(set(buckets)) != list(buckets):
            raise ValueError(f"config hyb.{dataset}.buckets must be strictly increasing, got {buckets}")
    for op, experiment in config["experiments"].items():
        if uses_tuning(experiment) and op not in config["tuning"]["budget_s"]:
            raise ValueError(f"config experiments.{op} has a 'tuned' contender but tuning.budget_s.{op} is not set")
        if not experiment["sparsetir"] and not experiment["baselines"]:
            raise ValueError(f"config experiments.{op}: no contenders (sparsetir and baselines are both empty)")
        for device, reference in experiment["reference"].items():
            if reference == BEST_CPU and device != "cpu":
                raise ValueError(f"config experiments.{op}.reference.{device}: {BEST_CPU} applies to the CPU only")
    return config

