"""The workflow's configuration beyond its JSON schema: dataset slugs, cases, formats, checks.

The Snakefile validates a config file against ``workflows/config/schema.yaml`` (types, keys)
and then calls :func:`check_config` before any job runs. It checks what a schema cannot and
raises ``ValueError`` naming the problem: known dataset names and generator specs within their
size limits, hyb bucket order, format strings (``sparsetir.formats.parse_format``, and whether
the format supports the op), references, CPU libraries and options (the variants the baseline
modules declare), a ``results`` folder inside the working tree, and an explicit ``data.mirror``
that exists. It also resolves the two ``auto`` values: ``results`` and ``data.mirror``.

Formats and baseline variants are facts about the code that take seconds to import (TVM,
torch); the answers are kept in the kernel cache, keyed by a digest of the sources, so
planning a workflow stays fast.
"""

import hashlib
import json
import os
import tempfile
from pathlib import Path

from sparsetir.bench.families import family_names
from sparsetir.data import MIRROR_ENV, dataset_slug

# The op-family experiments, from the harness's family registry (sparsetir/bench/families/): each is
# configured by a top-level config key of its name and run by workflows/rules/families.smk; one its
# config leaves out (or whose declaration has no workflow) is pending: its target writes tables that say so.
FAMILIES = family_names()
PENDING_EXPERIMENTS = FAMILIES  # the families without rules (kept for the pending step's descriptions)
BEST_CPU = "best-cpu-library"
AUTO = "auto"
REPO_ROOT = Path(__file__).resolve().parents[2]
#: The mirror ``data.mirror: auto`` finds when ``$SPARSETIR_DATA_MIRROR`` is unset: beside the repository.
SHARED_MIRROR = REPO_ROOT.parent / "shared" / "data"
#: What the default run keeps directly under ``results/``: a config's own folder may not take these names.
RESERVED_RESULTS = ("datasets", "logs", "reference", "gpu-bundle", "gpu-ingest", "spmm", "sddmm",
                    *PENDING_EXPERIMENTS)
__all__ = ["AUTO", "BEST_CPU", "FAMILIES", "PENDING_EXPERIMENTS", "pending_families", "workflow_families", "cases", "check_config", "data_mirror", "dataset_names",
           "dataset_slug", "hyb_format", "results_folder", "sparsetir_formats", "uses_tuning"]


def workflow_families() -> set[str]:
    """The registered families the workflow can run (``Family.workflow``: cases or training)."""
    from sparsetir.bench.families import families

    return {name for name, declared in families().items() if declared.workflow is not None}


def pending_families(config: dict, implemented) -> tuple:
    """The families whose target writes "pending" tables: not configured, or without rules yet."""
    return tuple(f for f in FAMILIES if f not in implemented or config.get(f) is None)


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


def results_folder(results: str, configfiles=()) -> str:
    """The results folder: ``results`` as given, or for ``auto``, ``results`` with the default config
    (no ``--configfile``, or one named ``default.yaml``) and ``results/<name>`` with config ``<name>.yaml``."""
    if results != AUTO:
        return results.rstrip("/") or "/"
    name = Path(str(configfiles[-1])).stem if configfiles else "default"
    if name == "default":
        return "results"
    if name in RESERVED_RESULTS or dataset_slug(name) != name:
        raise ValueError(f"config results: auto would write into results/{name}, which the default run uses or "
                         "which is not a plain folder name; rename the config file or set results explicitly")
    return f"results/{name}"


def data_mirror(mirror: str | None) -> str | None:
    """The mirror folder for ``data.mirror``: a folder as given, None for ``null``, and for ``auto``
    ``$SPARSETIR_DATA_MIRROR``, else ``../shared/data`` beside the repository, where present (else None)."""
    if mirror is None:
        return None
    if mirror != AUTO:
        return str(Path(mirror).expanduser().resolve())
    for candidate in (os.environ.get(MIRROR_ENV, "").strip(), str(SHARED_MIRROR)):
        if candidate and Path(candidate).expanduser().is_dir():
            return str(Path(candidate).expanduser().resolve())
    return None


def _check_results(results: str) -> None:
    tree = Path.cwd().resolve()
    folder = (tree / results).resolve()
    if folder == tree or tree not in folder.parents:
        raise ValueError(f"config results: {results!r} is not a folder inside the working tree {tree} "
                         "(the workflow writes and replaces files there)")


def check_config(config: dict, configfiles=()) -> dict:
    """Check what the schema cannot and resolve the ``auto`` values; return ``config`` or raise ``ValueError``.

    ``configfiles`` are the ``--configfile`` paths (they name the results folder of ``results: auto``).
    """
    from sparsetir.data import is_generated, names
    from sparsetir.data.generators import parse_spec

    config["results"] = results_folder(config["results"], configfiles)
    left_out = config.get("left_out") or {}
    unknown = sorted(set(left_out) - set(FAMILIES))
    if unknown:
        raise ValueError(f"config left_out: unknown famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                         f"known: {', '.join(FAMILIES)}")
    missing = [family for family in FAMILIES if config.get(family) is None and family not in left_out]
    if config.get("every_family") and missing:
        raise ValueError(f"config every_family: no section for {', '.join(missing)} (every family of the harness "
                         "must be configured here; give each a section, say why in left_out, or set every_family: "
                         "false)")
    _check_results(config["results"])
    mirror = config["data"].get("mirror")
    if mirror not in (None, AUTO) and not Path(mirror).expanduser().is_dir():
        raise ValueError(f"config data.mirror: {mirror!r} is not a directory (set a folder laid out like "
                         "shared/data, auto to use one where present, or null for none)")
    config["data"]["mirror"] = data_mirror(mirror)
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
        for device, reference in experiment.get("reference", {}).items():
            if reference == BEST_CPU and device != "cpu":
                raise ValueError(f"config experiments.{op}.reference.{device}: {BEST_CPU} applies to the CPU only")
    _check_against_the_code(config)
    return config


def _format_strings(config: dict) -> list[tuple[str, str, str]]:
    """(op, format string, where it comes from) for every format the experiments would compile."""
    datasets = [name for name, _ in cases(config)]
    found = []
    for op, experiment in config["experiments"].items():
        for contender, fmt in experiment["sparsetir"].items():
            if fmt in (TUNED, AUTO):
                continue
            where = f"experiments.{op}.sparsetir.{contender}"
            if fmt == "hyb":
                found += [(op, hyb_format(name, config["hyb"]), f"{where} (hyb table, {name})") for name in datasets]
            else:
                found.append((op, fmt, where))
    return list(dict.fromkeys(found))


def _check_against_the_code(config: dict) -> None:
    """Format strings, references, CPU libraries and options against the format registry and the baselines."""
    strings = _format_strings(config)
    facts = code_facts(sorted({(op, fmt) for op, fmt, _ in strings}))
    for op, fmt, where in strings:
        error = facts["formats"][f"{op} {fmt}"]
        if error:
            raise ValueError(f"config {where}: {error}")
    for op, experiment in config["experiments"].items():
        variants = {name: info["library"] for name, info in facts["variants"].get(op, {}).items()}
        known = ", ".join(sorted(variants))
        for device, reference in experiment.get("reference", {}).items():
            if reference == BEST_CPU or reference in experiment["sparsetir"]:
                continue
            if reference not in variants:
                raise ValueError(f"config experiments.{op}.reference.{device}: unknown contender {reference!r}; "
                                 f"known: {BEST_CPU} (cpu), the experiment's sparsetir contenders, or {known}")
            if device == config["device"] and variants[reference] not in experiment["baselines"]:
                raise ValueError(f"config experiments.{op}.reference.{device}: {reference!r} comes from the baseline "
                                 f"module {variants[reference]}, which experiments.{op}.baselines does not run")
        for library in experiment.get("cpu_libraries", []):
            if library not in variants:
                raise ValueError(f"config experiments.{op}.cpu_libraries: unknown library {library!r}; known: {known}")
        for variant in experiment.get("options") or {}:
            if variant not in variants:
                raise ValueError(f"config experiments.{op}.options: unknown variant {variant!r}; known: {known}")


def check_contenders(family: str, op: str, section: dict) -> None:
    """An op family's section: some contender, and every explicit ``sparsetir``
    format one that ``op`` takes (parsing a format imports the compiler: the cached code facts answer)."""
    if not section["sparsetir"] and not section["baselines"]:
        raise ValueError(f"config {family}: no contenders (sparsetir and baselines are both empty)")
    explicit = {name: fmt for name, fmt in section["sparsetir"].items()
                if fmt is not None and str(fmt).strip().lower() not in ("default", "none", "null", "auto")}
    if explicit:
        facts = code_facts(sorted({(op, fmt) for fmt in explicit.values()}))["formats"]
        for name, fmt in explicit.items():
            if facts[f"{op} {fmt}"]:
                raise ValueError(f"config {family}.sparsetir.{name}: {facts[f'{op} {fmt}']}")


def code_facts(format_checks: list[tuple[str, str]]) -> dict:
    """``{"formats": {"<op> <format>": error or None}, "variants": baselines.declarations()}``.

    Computing them imports ``sparsetir.formats`` (TVM) and the baseline modules (torch), seconds
    each, so the answer is kept in ``<kernel cache>/workflow-checks/``, keyed by the questions
    and a digest of the ``sparsetir`` and ``baselines`` sources.
    """
    from sparsetir.backend.cache import cache_dir, source_digest

    baselines_digest = hashlib.sha256()
    for path in sorted((REPO_ROOT / "baselines").glob("*.py")):
        baselines_digest.update(path.name.encode() + path.read_bytes())
    question = json.dumps([source_digest(), baselines_digest.hexdigest(), format_checks])
    path = cache_dir() / "workflow-checks" / f"{hashlib.sha256(question.encode()).hexdigest()[:32]}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    facts = {"formats": {f"{op} {fmt}": _format_error(op, fmt) for op, fmt in format_checks},
             "variants": _baseline_variants()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=".facts-", dir=path.parent)
        with os.fdopen(handle, "w") as out:
            json.dump(facts, out)
        os.replace(tmp, path)
    except OSError:  # not kept: the next plan asks the code again
        pass
    return facts


def _format_error(op: str, fmt: str) -> str | None:
    from sparsetir.formats import parse_format

    try:
        parsed = parse_format(fmt)
    except (ValueError, TypeError) as err:
        return str(err)
    if not type(parsed).supports(op):
        return f"format {fmt!r} does not support {op}"
    return None


def _baseline_variants() -> dict[str, dict[str, dict]]:
    import baselines

    return baselines.declarations()


# ---------------------------------------------------------------- the schema, derived from the declarations

BEST_CPU_DEFAULT = BEST_CPU  # a device no library declares a reference for is judged against its best library


def derived_schema(path: str | Path) -> Path:
    """``schema.yaml`` with its names filled in from the code: a file the workflow validates configs against.

    The schema names no baseline: a node ``{x-enum: {variants: KEY, libraries: true}}`` becomes the
    enum of the variants the libraries declare for op or family ``KEY`` (``baselines.declarations``),
    and of those libraries; ``x-default`` gives a node the derived default: ``{defaults: KEY}`` the
    variants that run by default, ``{library_references: KEY, device: D}`` the library references
    (listed for device ``D``), ``{reference: KEY}`` each device's declared reference (else
    ``best-cpu-library``), ``{reference: KEY, device: D}`` that device's. The result is kept in the
    kernel cache, keyed by the schema and the declarations, so planning stays fast.
    """
    import yaml

    from sparsetir.backend.cache import cache_dir

    text = Path(path).read_text()
    declared = code_facts([])["variants"]
    digest = hashlib.sha256(json.dumps([text, declared], sort_keys=True).encode()).hexdigest()[:32]
    out = cache_dir() / "workflow-checks" / f"schema-{digest}.json"
    if out.exists():
        return out
    schema = _fill(yaml.safe_load(text), declared)
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=".schema-", dir=out.parent)
    with os.fdopen(handle, "w") as stream:
        json.dump(schema, stream, indent=1)
    os.replace(tmp, out)
    return out


def _fill(node, declared: dict):
    """A copy of the schema ``node`` with its ``x-enum`` and ``x-default`` markers replaced (see :func:`derived_schema`)."""
    if isinstance(node, list):
        return [_fill(item, declared) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _fill(value, declared) for key, value in node.items() if not key.startswith("x-")}
    if "x-enum" in node:
        marker = node["x-enum"]
        variants = declared.get(marker["variants"], {})
        libraries = list(dict.fromkeys(info["library"] for info in variants.values())) if marker.get("libraries") else []
        out["enum"] = [*variants, *libraries]
    if "x-default" in node:
        out["default"] = _derived_default(node["x-default"], declared)
    return out


def _derived_default(marker: dict, declared: dict):
    if "defaults" in marker:
        return [name for name, info in declared.get(marker["defaults"], {}).items()
                if info["default"] and "cpu" in info["devices"]]
    if "library_references" in marker:
        device = marker.get("device")
        return [name for name, info in declared.get(marker["library_references"], {}).items()
                if info["library_reference"] and (device is None or device in info["devices"])]
    references = {}
    for name, info in declared.get(marker["reference"], {}).items():
        for device in info["reference_on"]:
            references.setdefault(device, name)
    if "device" in marker:
        return references.get(marker["device"])
    return {device: references.get(device, BEST_CPU_DEFAULT) for device in ("cpu", "cuda")}
