"""Workflow step: GraphSAGE training, every contender interleaved, on one dataset; writes its records.

The dataset runs in each mode whose ``datasets`` list it: ``full`` (the whole graph each epoch), then
``minibatch`` (sampled blocks, a fresh structure per batch); the settings come from the config's
``sage:`` section (``sparsetir.bench.sage`` runs it). Spin limits and thread counts are set before torch or TVM load, and the data routes follow
the config's ``data:`` section. The records file is written atomically: a killed job leaves no
partial output, and a rerun redoes only it.
"""


import sys
from pathlib import Path

MODES = ("full", "minibatch")
SPARSETIR_OPTIONS = ("sparse_features", "compiled", "format")


def check_sage_config(sage: dict) -> None:
    """What the schema cannot check, before any job: known datasets (a labelled graph, a registry
    graph or a generator spec), more epochs than warm-up epochs, one fan-out per layer, contender
    options and names that do not collide. Raises ``ValueError`` naming the problem."""
    from sparsetir.data import is_generated, names
    from sparsetir.data.generators import parse_spec
    from sparsetir.data.node_classification import labelled_graphs

    known = set(names()) | set(labelled_graphs())
    for mode in MODES:
        section = sage[mode]
        if section["epochs"] <= section["warmup"]:
            raise ValueError(f"config sage.{mode}: epochs ({section['epochs']}) must exceed warmup "
                             f"({section['warmup']}), or no epoch is timed")
        for name in section["datasets"]:
            if is_generated(name):
                try:
                    parse_spec(name)
                except ValueError as error:
                    raise ValueError(f"config sage.{mode}.datasets: {error}") from None
            elif name not in known:
                raise ValueError(f"config sage.{mode}.datasets: unknown dataset {name!r}; labelled graphs: "
                                 f"{', '.join(labelled_graphs())}; or any registry graph (random features, time "
                                 "only) or generator spec")
    if any(fanout == 0 for fanout in sage["minibatch"]["fanouts"]):
        raise ValueError(f"config sage.minibatch.fanouts {sage['minibatch']['fanouts']}: a fan-out must be positive "
                         "(or -1: all neighbours)")
    if len(sage["minibatch"]["fanouts"]) != sage["layers"]:
        raise ValueError(f"config sage.minibatch.fanouts {sage['minibatch']['fanouts']} must give one fan-out per "
                         f"layer ({sage['layers']})")
    for name, options in sage["sparsetir"].items():
        unknown = set(options or {}) - set(SPARSETIR_OPTIONS)
        if unknown:
            raise ValueError(f"config sage.sparsetir.{name}: unknown options {sorted(unknown)}; options: "
                             f"{', '.join(SPARSETIR_OPTIONS)}")
        if name in sage["baselines"]:
            raise ValueError(f"config sage.sparsetir.{name}: the name of a baseline")


def settings_for(sage: dict, mode: str):
    """The ``SageSettings`` of one mode from the config's ``sage:`` section."""
    from sparsetir.bench.sage import SageSettings

    section = sage[mode]
    return SageSettings(hidden=sage["hidden"], layers=sage["layers"], lr=sage["lr"], dropout=sage["dropout"],
                        epochs=section["epochs"], warmup=section["warmup"],
                        fanouts=tuple(sage["minibatch"]["fanouts"]), batch_size=sage["minibatch"]["batch_size"],
                        random_features=sage["random_features"], random_classes=sage["random_classes"])


def main(*, output: Path, dataset: str, sage: dict, data: dict, threads: int) -> list[dict]:
    from prepare_dataset import configure_data_routes

    from sparsetir.bench.threads import configure_threads

    configure_data_routes(data)
    for warning in configure_threads(threads):  # spin limits and threads, before torch/TVM load
        print(warning, file=sys.stderr)
    from sparsetir.bench.records import write_json_atomic
    from sparsetir.bench.sage import run_sage, summary

    records = []
    for mode in MODES:
        if dataset in sage[mode]["datasets"]:
            records += run_sage(dataset, mode, settings_for(sage, mode), seeds=sage["seeds"],
                                contenders=sage["sparsetir"], baselines=sage["baselines"], threads=threads,
                                log=lambda line: print(line, file=sys.stderr, flush=True))
    print(summary(records), file=sys.stderr, flush=True)
    write_json_atomic(output, records)
    return records


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        main(output=Path(snakemake.output[0]), dataset=snakemake.params.dataset, sage=snakemake.params.sage,
             data=snakemake.params.data, threads=snakemake.threads)
