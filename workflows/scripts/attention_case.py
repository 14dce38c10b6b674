"""Workflow step: time block-sparse attention on every mask for one sequence length; write records.

The masks come from ``sparsetir.data.masks`` (config ``attention.masks``: name -> its keyword
arguments); each sparsetir contender (config ``attention.sparsetir``: name -> format and knobs) and
each baseline variant (``baselines.torch_attention``) runs on the same seeded operands, is checked
against the float64 reference and timed interleaved (``sparsetir.bench.families.attention``). All masks of
one length run in one process, so FlexAttention's ``torch.compile`` is paid once per shape; it is
reported as its compile time. Spin limits and threads are set before torch or TVM load. The
records file is written atomically.
"""


import sys
from pathlib import Path

MASK_KINDS = ("longformer", "bigbird", "butterfly")
CONTENDER_KEYS = ("format", "fuse_rows", "row_tile", "score_tile", "tensor_cores")


def check_attention_config(settings: dict) -> None:
    """What the schema cannot see: known mask kinds and their arguments, known baseline variants, a
    reference among the baselines, and sequence lengths the block divides. ``ValueError`` names it."""
    import inspect

    masks = settings["masks"]
    for name, arguments in masks.items():
        kind = (arguments or {}).get("kind", name)
        if kind not in MASK_KINDS:
            raise ValueError(f"attention.masks.{name}: unknown mask kind {kind!r}; known: {list(MASK_KINDS)}")
        from sparsetir.data import masks as generators

        accepted = set(inspect.signature(getattr(generators, kind)).parameters) - {"seq", "block"}
        unknown = sorted(set(arguments or {}) - accepted - {"kind"})
        if unknown:
            raise ValueError(f"attention.masks.{name}: {kind} takes {sorted(accepted)}, not {unknown}")
    for seq in settings["seqs"]:
        if seq % settings["block"]:
            raise ValueError(f"attention.seqs: {seq} is not a multiple of the block {settings['block']}")
    if not set(settings["reference"]) & set(settings["baselines"]):
        raise ValueError(f"attention.reference names {settings['reference']}, none of which attention.baselines runs")
    for name, contender in settings["sparsetir"].items():
        unknown = sorted(set(contender or {}) - set(CONTENDER_KEYS))
        if unknown:
            raise ValueError(f"attention.sparsetir.{name}: unknown setting(s) {unknown}; known: {list(CONTENDER_KEYS)}")


def make_layout(kind: str, seq: int, block: int, arguments: dict):
    from sparsetir.data import masks

    arguments = {k: v for k, v in (arguments or {}).items() if k != "kind"}
    return getattr(masks, kind)(seq, block, **arguments)


def main(*, output: Path, seq: int, settings: dict, timing: dict, device: str, seed: int, threads: int) -> list[dict]:
    from sparsetir.bench.threads import configure_threads

    for warning in configure_threads(threads):  # spin limits and threads, before torch/TVM load
        print(warning, file=sys.stderr)
    import torch

    torch.set_num_threads(threads)
    from sparsetir.bench.families.attention import attention_case
    from sparsetir.bench.records import write_json_atomic
    from sparsetir.timing import TimingPolicy

    policy = TimingPolicy.from_mapping(timing)
    records = []
    for name, arguments in settings["masks"].items():
        kind = (arguments or {}).get("kind", name)
        layout = make_layout(kind, seq, settings["block"], arguments)
        print(f"attention {name} seq {seq}: {layout.shape[0]}x{layout.shape[1]} blocks of {settings['block']}, "
              f"{100 * (1 - layout.mean()):.1f}% of them masked; {settings['heads']} heads, batch "
              f"{settings['batch']}, head dim {settings['head_dim']}, {threads} thread(s)", file=sys.stderr, flush=True)
        case = attention_case(
            case=f"{name}-seq{seq}", mask=name, layout=layout, block=settings["block"], batch=settings["batch"],
            heads=settings["heads"], seq=seq, head_dim=settings["head_dim"], dtype=settings.get("dtype", "float32"),
            contenders={k: dict(v or {}) for k, v in settings["sparsetir"].items()}, baselines=settings["baselines"],
            options=settings.get("options") or {}, timing=policy, device=device, seed=seed)
        print(summary(case), file=sys.stderr, flush=True)
        records += case
    write_json_atomic(output, records)
    return records


def summary(records: list[dict]) -> str:
    """One line per contender: median ms (and setup) or why it did not run."""
    lines = []
    for record in records:
        if record["status"] == "ok":
            setup = ", ".join(f"{k} {v:.2f}" for k, v in record["times"].items() if v)
            outcome = f"{record['stats']['median'] * 1e3:9.3f} ms  {setup}"
        else:
            outcome = f"{record['status']}: {record['reason']}"
        lines.append(f"  {record['contender']:<24} {outcome}")
    return "\n".join(lines)


if "snakemake" in globals():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from case_workers import run_step
    from step_log import output_to_log

    with output_to_log(snakemake.log[0]):
        run_step(__file__, main, dict(
            seq=int(snakemake.wildcards.seq), settings=snakemake.params.settings, timing=snakemake.params.timing,
            device=snakemake.params.device, seed=snakemake.params.seed, threads=snakemake.threads),
            output=Path(snakemake.output[0]), timing=snakemake.params.timing)
