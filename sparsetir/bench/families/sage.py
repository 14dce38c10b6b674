"""GraphSAGE training (a :class:`Family` declaration): the training loop is :mod:`sparsetir.bench.sage`.

    python -m sparsetir.bench sage --dataset cora --mode full --epochs 20 [--seeds 0 1] [--json out.json]
"""

from __future__ import annotations

from ..family import Family, register
from ..sage import EXPERIMENT, MODES, SageSettings, run_sage, summary

__all__ = ["CONTENDER_OPTIONS", "FAMILY", "SPARSETIR_OPTIONS", "settings_for"]

#: the sparsetir contenders the command line knows (``--contender``)
CONTENDER_OPTIONS = {"sparsetir": {}, "sparsetir-sparse-x": {"sparse_features": "auto"},
                     "sparsetir-compiled": {"compiled": True},
                     "sparsetir-fused-dropout": {"dropout_in_aggregation": True}}


#: the options a configured sparsetir contender may set
SPARSETIR_OPTIONS = ("sparse_features", "compiled", "format", "dropout_in_aggregation")


def settings_for(section: dict, mode: str) -> SageSettings:
    """The ``SageSettings`` of one mode from the config's section."""
    mine = section[mode]
    return SageSettings(hidden=section["hidden"], layers=section["layers"], lr=section["lr"],
                        dropout=section["dropout"], epochs=mine["epochs"], warmup=mine["warmup"],
                        fanouts=tuple(section["minibatch"]["fanouts"]), batch_size=section["minibatch"]["batch_size"],
                        random_features=section["random_features"], random_classes=section["random_classes"])


class Sage(Family):
    """GraphSAGE training: a family timed by its own loop, epoch by epoch (``bench.sage``)."""

    name = op = EXPERIMENT
    title = "GraphSAGE training"
    description = "GraphSAGE training (3 layers, hidden 128) vs DGL"

    workflow = "cases"
    case_step = "train"
    case_in_workers = False  # training runs in one process
    figures = {"epoch_time": "epoch_time.png", "accuracy": "accuracy_vs_time.png"}

    def workflow_cases(self, settings) -> dict[str, dict]:
        """One job per graph, its modes one after the other (full graph, then mini-batch)."""
        from ...data import dataset_slug  # noqa: PLC0415

        return {dataset_slug(name): {"dataset": name} for mode in MODES for name in settings[mode]["datasets"]}

    def data_needs(self, section) -> list:
        """Each mode's graphs: a labelled graph's file with features and labels, else the registry's graph."""
        from ...data import entry, names  # noqa: PLC0415
        from ...data.node_classification import LABELLED_GRAPHS  # noqa: PLC0415

        registry, needs = set(names()), []
        for mode in MODES:
            for name in (section.get(mode) or {}).get("datasets", []):
                if name in LABELLED_GRAPHS:  # the file with features and labels (cora's is not the Planetoid one)
                    files = (LABELLED_GRAPHS[name].file,)
                    same = name in registry and files == entry(name).files
                    needs.append((name, files, self.name, name if same else f"{name} (features, labels)"))
                elif name in registry:
                    needs += self.registry_needs([name])
        return needs

    def check_config(self, section) -> None:
        """What the schema cannot check, before any job: known datasets (a labelled graph, a registry
        graph or a generator spec), more epochs than warm-up epochs, one fan-out per layer, contender
        options and names that do not collide."""
        from ...data import is_generated, names  # noqa: PLC0415 - only when a config is checked
        from ...data.generators import parse_spec  # noqa: PLC0415
        from ...data.node_classification import labelled_graphs  # noqa: PLC0415

        known = set(names()) | set(labelled_graphs())
        for mode in MODES:
            mine = section[mode]
            if mine["epochs"] <= mine["warmup"]:
                raise ValueError(f"config {self.name}.{mode}: epochs ({mine['epochs']}) must exceed warmup "
                                 f"({mine['warmup']}), or no epoch is timed")
            for name in mine["datasets"]:
                if is_generated(name):
                    self.check_names(f"{mode}.datasets", [name], parse_spec)
                elif name not in known:
                    raise ValueError(f"config {self.name}.{mode}.datasets: unknown dataset {name!r}; labelled graphs: "
                                     f"{', '.join(labelled_graphs())}; or any registry graph (random features, time "
                                     "only) or generator spec")
        fanouts = section["minibatch"]["fanouts"]
        if any(fanout == 0 for fanout in fanouts):
            raise ValueError(f"config {self.name}.minibatch.fanouts {fanouts}: a fan-out must be positive "
                             "(or -1: all neighbours)")
        if len(fanouts) != section["layers"]:
            raise ValueError(f"config {self.name}.minibatch.fanouts {fanouts} must give one fan-out per "
                             f"layer ({section['layers']})")
        for name, options in section["sparsetir"].items():
            unknown = set(options or {}) - set(SPARSETIR_OPTIONS)
            if unknown:
                raise ValueError(f"config {self.name}.sparsetir.{name}: unknown options {sorted(unknown)}; options: "
                                 f"{', '.join(SPARSETIR_OPTIONS)}")
            if name in section["baselines"]:
                raise ValueError(f"config {self.name}.sparsetir.{name}: the name of a baseline")

    def workflow_case(self, case, settings, *, timing, device, seed, threads, say) -> list[dict]:
        """Every contender trained on one graph (``case["dataset"]``) in each mode whose ``datasets`` list it,
        interleaved by epoch, for every seed (``bench.sage.run_sage``)."""
        records = []
        for mode in MODES:
            if case["dataset"] in settings[mode]["datasets"]:
                records += run_sage(case["dataset"], mode, settings_for(settings, mode), seeds=settings["seeds"],
                                    contenders=settings["sparsetir"], baselines=settings["baselines"],
                                    threads=threads, log=say)
        say(summary(records))
        return records

    def contenders(self, sparsetir_formats=(None,), baselines=None, **_):
        """The baseline names: the training loop builds its contenders itself."""
        return baselines

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dataset", action="append", required=True)
        parser.add_argument("--mode", action="append", choices=MODES)
        parser.add_argument("--seeds", type=int, nargs="+", help="one training run per seed (default: --seed)")
        parser.add_argument("--epochs", type=int, default=SageSettings.epochs)
        parser.add_argument("--warmup", type=int, default=SageSettings.warmup)
        parser.add_argument("--contender", action="append", choices=tuple(CONTENDER_OPTIONS),
                            help="default: sparsetir and sparsetir-sparse-x")

    def cli_cases(self, args, timing, contenders, say):
        ours = {name: CONTENDER_OPTIONS[name] for name in (args.contender or ["sparsetir", "sparsetir-sparse-x"])}
        settings = SageSettings(epochs=args.epochs, warmup=args.warmup)
        for dataset in args.dataset:
            for mode in args.mode or ["full"]:
                yield f"{dataset} ({mode})", lambda dataset=dataset, mode=mode: run_sage(
                    dataset, mode, settings, seeds=args.seeds or [args.seed], contenders=ours, baselines=contenders,
                    log=say)

    def format_records(self, records) -> str:
        return summary(records)

    def headline_text(self, records) -> str:
        return ""


FAMILY = register(Sage())
