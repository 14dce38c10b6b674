"""Block-sparse attention in a GPU bundle: candidates built here, checked and timed on the GPU host.

Build (compile host, :func:`build_attention_section`): for each (mask, sequence length) the block
layout (``sparsetir.data.masks``) goes to ``inputs/attention-<mask>-seq<N>.npz``, and one
``compile_sparse_attention`` kernel per candidate configuration (BSR, DBSR, SR-BCRS; tensor cores
in float16/bfloat16) is compiled for the bundle's target with real device code. The manifest gets
a section ``attention``: batch, heads, head dim, block, dtype, seed, baselines, cases.

Run (GPU host, TVM runtime only, :func:`run_attention_cases`): per case q, k and v are rebuilt
from the seed (``bench.attention.attention_operands``, the CPU benchmark's), each candidate is
loaded (``runtime.load``), the baselines of ``baselines/torch_attention.py`` run on the device
(Triton block-sparse through ``torch.sparse._triton_ops``, FlexAttention, SDPA with the dense
mask, torch's BSR), everything is checked against the float64 reference (1e-5 of its largest
value in float32, 1e-2 in half precision), then timed with the one timer (CUDA events, L2 flush).
Records go to ``<out>/records/attention/seq<N>.json`` in the CPU records' form (``case``,
``setting``, ``kind``), so ``workflows/scripts/attention_tables.py`` reads them as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ...reference import Case
from ...reference.sparse_attention import attention_reference, dense_mask
from ...runtime import load
from ..attention import attention_operands
from ..case_runner import status_of
from ..engine import Row, prepare, time_rows
from ..records import ALL_CONTENDERS, make_record
from .in_turn import run_cases_in_turn

__all__ = ["ATTENTION_BUNDLE_BASELINES", "DEFAULT_ATTENTION_CONFIGS", "DEFAULT_ATTENTION_MASKS",
           "build_attention_section", "run_attention_cases"]

#: Candidate configurations, in order (tensor cores apply to float16/bfloat16 only).
DEFAULT_ATTENTION_CONFIGS = ({"format": "bsr", "tensor_cores": True}, {"format": "dbsr", "tensor_cores": True},
                             {"format": "srbcrs", "tensor_cores": True})
DEFAULT_ATTENTION_MASKS = {"longformer": {"window": 32}, "bigbird": {"window": 16, "n_global": 1, "n_random": 1},
                           "butterfly": {}}
#: sdpa-dense (no mask) computes something else, so the runner's check would refuse it: not here.
ATTENTION_BUNDLE_BASELINES = ("triton-blocksparse", "flex-attention", "flex-attention-fine", "sdpa-dense-mask",
                              "torch-bsr")
_OP = "sparse_attention"


# ---------------------------------------------------------------- build (compile host)


def build_attention_section(staging: Path, seqs: Sequence[int], *, masks: dict | None = None, batch: int = 1,
                            heads: int = 12, head_dim: int = 64, block: int = 16, dtype: str = "float16", target,
                            seed: int, scratch: Path, store_library: Callable, store_candidate_files: Callable,
                            limit: int = len(DEFAULT_ATTENTION_CONFIGS),
                            baselines: Sequence[str] = ATTENTION_BUNDLE_BASELINES,
                            say: Callable[[str], None] = lambda message: None) -> dict:
    """Compile the attention candidates into the bundle being staged; the manifest's ``attention`` section.
    ``masks``: name -> keyword arguments of its generator in ``sparsetir.data.masks`` (``kind`` names
    the generator when it is not the name). ``store_library``/``store_candidate_files``: the bundle's
    content-addressed stores."""
    from ...backend import device_of, normalize_target  # noqa: PLC0415 - compile host only
    from ...data import masks as generators  # noqa: PLC0415 - compile host only: the runner reads the layouts
    from ...ops import compile_sparse_attention  # noqa: PLC0415 - compile host only: the runner never imports this

    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"the attention candidate limit must be a positive int, got {limit!r}")
    unknown = sorted(set(baselines) - set(ATTENTION_BUNDLE_BASELINES))
    if unknown:
        raise ValueError(f"unknown attention bundle baseline(s) {unknown}; "
                         f"known: {', '.join(ATTENTION_BUNDLE_BASELINES)}")
    cuda = device_of(normalize_target(target)) == "cuda"  # tensor cores are a CUDA knob
    cases = []
    for name, arguments in (DEFAULT_ATTENTION_MASKS if masks is None else masks).items():
        arguments = dict(arguments or {})
        kind = arguments.pop("kind", name)
        if kind not in ("longformer", "bigbird", "butterfly"):
            raise ValueError(f"unknown attention mask kind {kind!r}: longformer, bigbird or butterfly")
        for seq in dict.fromkeys(int(s) for s in seqs):
            started = time.perf_counter()
            layout = getattr(generators, kind)(seq, block, **arguments)
            case_name = f"{name}-seq{seq}"
            relpath = f"inputs/attention-{case_name}.npz"
            np.savez_compressed(staging / relpath, layout=layout)
            candidates = []
            for index, config in enumerate(DEFAULT_ATTENTION_CONFIGS[:limit]):
                knobs = config if cuda else {k: v for k, v in config.items() if k != "tensor_cores"}
                kernel = compile_sparse_attention(layout, head_dim, block=block, dtype=dtype, target=target, **knobs)
                library, _ = store_library(staging, Path(kernel.function.library))
                manifest_rel, structure_rel = store_candidate_files(staging, kernel, scratch)
                candidates.append({"id": f"attention-{case_name}-{index:02d}", "config": dict(config),
                                   "library": library, "manifest": manifest_rel, "structure": structure_rel,
                                   "compile_s": kernel.timings.get("compile_s"),
                                   "convert_s": kernel.timings.get("convert_s")})
            cases.append({"case": case_name, "mask": name, "seq": seq, "input": relpath,
                          "block_sparsity": 1.0 - float(layout.mean()), "candidates": candidates})
            say(f"attention {case_name}: {len(candidates)} candidates in {time.perf_counter() - started:.1f} s")
    return {"batch": batch, "heads": heads, "head_dim": head_dim, "block": block, "dtype": dtype, "seed": seed,
            "baselines": list(baselines), "cases": cases}


# ---------------------------------------------------------------- run (GPU host, runtime only)


def _reference_case(q, k, v, layout, block: int, dtype: str) -> Case:
    """The float64 result; the tolerance the CPU benchmark allows (relative to its largest value)."""
    reference = attention_reference(q.double(), k.double(), v.double(), layout, block)
    relative = 1e-5 if dtype == "float32" else 1e-2
    tolerance = np.full_like(reference, relative * (float(np.abs(reference).max()) or 1.0))
    return Case((q, k, v), reference, tolerance, 4 * q.numel() * q.element_size())


def run_attention_case(bundle: Path, section: dict, case: dict, scratch: Path, assemble: Callable, *, device: str,
                       bandwidth: dict, timing, where: dict) -> list[dict]:
    """Check and time one case's candidates and baselines; one validated record per contender."""
    import torch  # noqa: PLC0415 - the GPU host has torch; the runner imports it after the thread settings

    with np.load(bundle / case["input"], allow_pickle=False) as arrays:
        layout = arrays["layout"]
    block, dtype, seq, head_dim = section["block"], section["dtype"], case["seq"], section["head_dim"]
    batch, heads = section["batch"], section["heads"]
    q, k, v = attention_operands(batch, heads, seq, head_dim, dtype, section["seed"])
    bench_case = _reference_case(q, k, v, layout, block, dtype)
    q, k, v = (x.to(device) for x in (q, k, v))
    rows, candidates = [], {}
    for candidate in case["candidates"]:
        name = f"sparsetir-{candidate['config']['format']}"
        candidates[name] = candidate
        library = assemble(bundle, candidate, scratch)

        def factory(library=library):
            kernel = load(library)
            out = torch.empty_like(q)
            return lambda: kernel(q, k, v, out=out)

        rows.append(prepare(Row(name, "compile"), factory, bench_case))
    rows += _baseline_rows(section["baselines"], q, k, v, layout, block, bench_case, device)
    time_rows(_OP, rows, bench_case, bandwidth["bytes_per_s"], timing, device)
    kept = int(dense_mask(layout, block, seq, seq).sum()) * heads * batch
    info = {"mask": case["mask"], "block": block, "batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
            "dtype": dtype, "block_sparsity": case["block_sparsity"], "layout_per_head": False}
    records = []
    for row in rows:
        status, reason = status_of(row)
        candidate = candidates.get(row.contender)
        times = ({"convert_s": candidate.get("convert_s"), "compile_s": candidate.get("compile_s"),
                  "setup_s": row.setup_s} if candidate else {"convert_s": row.setup_s, "setup_s": row.setup_s})
        record = make_record(
            experiment="attention", op=_OP, device=device, dataset=case["case"], feat=head_dim,
            contender=row.contender, status=status, reason=reason, stats=row.stats.to_dict() if row.stats else None,
            shape=[seq, seq], nnz=kept, variant=candidate["config"]["format"] if candidate else row.contender,
            times=times, min_bytes=bench_case.min_bytes, flops=4 * kept * head_dim,
            copy_bytes_per_s=bandwidth["bytes_per_s"], provenance=where)
        record.update(case=case["case"], setting=dict(info), kind="sparsetir" if candidate else "baseline")
        if candidate is not None:
            record["setting"]["candidate"] = {"id": candidate["id"], "config": candidate["config"]}
        records.append(record)
    return records


def _baseline_rows(names: Sequence[str], q, k, v, layout, block: int, case: Case, device: str) -> list[Row]:
    """One checked row per ``baselines/torch_attention.py`` variant (unavailable ones say why)."""
    try:
        import baselines.torch_attention as module  # noqa: PLC0415 - imports torch: after the thread settings
    except Exception as error:  # a broken optional library must not stop the run
        return [Row(name, "conversion", error=f"unavailable: cannot import baselines.torch_attention: {error}")
                for name in names]
    ok, why = module.available(_OP, device)
    rows = []
    for name in names:
        row = Row(name, "conversion")
        if not ok:
            row.error = f"unavailable: {why}"
            rows.append(row)
            continue
        variant = module.VARIANTS[_OP][name]
        rows.append(prepare(row, lambda variant=variant: variant(q, k, v, layout, block, device=device), case))
    return rows


def run_attention_cases(bundle: Path, manifest: dict, out: Path, scratch: Path, assemble: Callable, *,
                        bandwidth: dict, timing, where: dict, deadline_s: float,
                        say: Callable[[str], None]) -> list[str]:
    """Every attention case of the bundle that fits before ``deadline_s`` (``time.monotonic()``); the record
    files, one per sequence length."""
    section, device = manifest["attention"], manifest["device"]

    def failed(case: dict, reason: str) -> list[dict]:
        return [make_record(experiment="attention", op=_OP, device=device, dataset=case["case"],
                            feat=section["head_dim"], contender=ALL_CONTENDERS, status="failed", reason=reason,
                            provenance=where)]

    return run_cases_in_turn(
        section["cases"], lambda case: run_attention_case(bundle, section, case, scratch, assemble, device=device,
                                                          bandwidth=bandwidth, timing=timing, where=where),
        out, family="attention", file_of=lambda case: f"records/attention/seq{case['seq']}.json",
        label_of=lambda case: case["case"], failed=failed, deadline_s=deadline_s, say=say)
