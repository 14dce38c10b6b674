"""Block-sparse attention in a GPU bundle: candidates built here, checked and timed on the GPU host.

Build (compile host, :func:`build_attention_section`): for each (mask, sequence length) the block
layout (``sparsetir.data.masks``) goes to ``inputs/attention-<mask>-seq<N>.npz``, and one
``compile_sparse_attention`` kernel per candidate configuration (BSR, DBSR, SR-BCRS; tensor cores
in float16/bfloat16) is compiled for the bundle's target with real device code. The manifest gets
a section ``attention``: batch, heads, head dim, block, dtype, seed, baselines, cases.

Run (GPU host, TVM runtime only, :func:`run_attention_cases`): per case q, k and v are rebuilt
from the seed (``bench.families.attention.attention_operands``, the CPU benchmark's), each candidate is
loaded (``runtime.load``), the baselines of ``baselines/torch_attention.py`` run on the device
(Triton block-sparse through ``torch.sparse._triton_ops``, FlexAttention, SDPA with the dense
mask, torch's BSR), everything is checked against the float64 reference (1e-5 of its largest
value in float32, 1e-2 in half precision), then timed with the one timer (CUDA events, L2 flush).
Records go to ``<out>/records/attention/seq<N>.json`` in the CPU records' form (``case``,
``setting``, ``kind``), so the family's tables (``bench.report.families``) read them as they are.

PrunedBERT (``prunedbert`` in the section, :func:`build_prunedbert_section`): each weight (a DLMC
name or ``block-pruned/<rows>x<cols>/<block>/<sparsity>``: ``data.masks.pruned_weight``), its values
seeded as the CPU benchmark seeds them, goes to ``inputs/prunedbert-<name>.npz`` with one
``compile_spmm`` kernel per format (csr, bsr:32, dbsr:32, srbcrs:8:32 by default) and, in a CUDA
bundle, the block rows on tensor cores (``TENSOR_CORE_PRUNEDBERT_CONFIGS``: ``block_kernel=True``,
float16/bfloat16 operands, float32 accumulators) where the weight's columns and the tokens allow
them; the runner checks and times them against cuBLAS dense (``torch-dense``) and cuSPARSE
(``torch-csr-i32``), a half-precision candidate on its rounded inputs with the half-precision
tolerance, writing ``<out>/records/attention/prunedbert.json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import baselines as declared

from ...data import dataset_slug
from ...reference import Case, get_reference
from ...reference.sparse_attention import attention_reference, dense_mask
from ...reference.spmm import spmm_reference
from ...runtime import load
from ..case_runner import status_of
from ..engine import Row, baseline_row, prepare, time_rows
from ..families.attention import attention_operands
from ..records import ALL_CONTENDERS, make_record
from .candidates import (
    candidate_dtype,
    candidate_factory,
    half_precision_case,
    note_candidate,
    rounded_to,
)
from .in_turn import row_times, run_cases_in_turn
from .manifest import bundle_baselines
from .parts import BundlePart

__all__ = ["DEFAULT_ATTENTION_CONFIGS", "DEFAULT_ATTENTION_MASKS", "PART", "DEFAULT_PRUNEDBERT_FORMATS",
           "TENSOR_CORE_PRUNEDBERT_CONFIGS", "build_attention_section", "build_prunedbert_section", "prunedbert_configs",
           "run_attention_cases", "run_prunedbert_cases"]

#: Candidate configurations, in order (tensor cores apply to float16/bfloat16 only).
DEFAULT_ATTENTION_CONFIGS = ({"format": "bsr", "tensor_cores": True}, {"format": "dbsr", "tensor_cores": True},
                             {"format": "srbcrs", "tensor_cores": True})
DEFAULT_ATTENTION_MASKS = {"longformer": {"window": 32}, "bigbird": {"window": 16, "n_global": 1, "n_random": 1},
                           "butterfly": {}}
_OP = "sparse_attention"
_PRUNEDBERT = "prunedbert"  # the baselines declared for it: a pruned weight times the activations
DEFAULT_PRUNEDBERT_FORMATS = {"sparsetir-csr": "csr", "sparsetir-bsr-32": "bsr:32", "sparsetir-dbsr-32": "dbsr:32",
                              "sparsetir-srbcrs-8-32": "srbcrs:8:32"}
#: A CUDA bundle's PrunedBERT candidates beside them: block rows on tensor cores (``ops.spmm``'s
#: ``block_kernel=True`` on CUDA, ``schedule/staged_cuda.schedule_block_row_cuda``), where they take the weight
TENSOR_CORE_PRUNEDBERT_CONFIGS = {
    "sparsetir-bsr-32-wmma-float16": {"format": "bsr:32", "block_kernel": True, "dtype": "float16"},
    "sparsetir-bsr-16-wmma-bfloat16": {"format": "bsr:16", "block_kernel": True, "dtype": "bfloat16"}}


# ---------------------------------------------------------------- build (compile host)


def build_attention_section(staging: Path, seqs: Sequence[int], *, masks: dict | None = None, batch: int = 1,
                            heads: int = 12, head_dim: int = 64, block: int = 16, dtype: str = "float16", target,
                            seed: int, scratch: Path, store_library: Callable, store_candidate_files: Callable,
                            limit: int = len(DEFAULT_ATTENTION_CONFIGS),
                            baselines: Sequence[str] | None = None, prunedbert: dict | None = None,
                            say: Callable[[str], None] = lambda message: None) -> dict:
    """Compile the attention candidates into the bundle being staged; the manifest's ``attention`` section.
    ``masks``: name -> keyword arguments of its generator in ``sparsetir.data.masks`` (``kind`` names
    the generator when it is not the name). ``store_library``/``store_candidate_files``: the bundle's
    content-addressed stores. ``prunedbert``: also PrunedBERT's weights (``{"matrices": [...], "tokens": 256,
    "formats": {name: format}, "baselines": [...]}``, :func:`build_prunedbert_section`)."""
    from ...backend import device_of, normalize_target  # noqa: PLC0415 - compile host only
    from ...data import masks as generators  # noqa: PLC0415 - compile host only: the runner reads the layouts
    from ...ops import compile_sparse_attention  # noqa: PLC0415 - compile host only: the runner never imports this

    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"the attention candidate limit must be a positive int, got {limit!r}")
    device = device_of(normalize_target(target))
    cuda = device == "cuda"  # tensor cores are a CUDA knob
    baselines = bundle_baselines(_OP, baselines, device, same_result=True)
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
    section = {"batch": batch, "heads": heads, "head_dim": head_dim, "block": block, "dtype": dtype, "seed": seed,
               "baselines": list(baselines), "cases": cases}
    if prunedbert:
        section["prunedbert"] = build_prunedbert_section(
            staging, prunedbert["matrices"], tokens=prunedbert.get("tokens", 256), formats=prunedbert.get("formats"),
            target=target, seed=seed, scratch=scratch, store_library=store_library,
            store_candidate_files=store_candidate_files,
            baselines=prunedbert.get("baselines"), say=say)
    return section


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
    rows += [baseline_row(entry, bench_case, device, inputs=(q, k, v, layout, block))
             for entry in declared.variants(_OP, section["baselines"]).values()]
    time_rows(_OP, rows, bench_case, bandwidth["bytes_per_s"], timing, device)
    kept = int(dense_mask(layout, block, seq, seq).sum()) * heads * batch
    info = {"mask": case["mask"], "block": block, "batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
            "dtype": dtype, "block_sparsity": case["block_sparsity"], "layout_per_head": False}
    records = []
    for row in rows:
        status, reason = status_of(row)
        candidate = candidates.get(row.contender)
        record = make_record(
            experiment="attention", op=_OP, device=device, dataset=case["case"], feat=head_dim,
            contender=row.contender, status=status, reason=reason, stats=row.stats.to_dict() if row.stats else None,
            shape=[seq, seq], nnz=kept, variant=candidate["config"]["format"] if candidate else row.contender,
            times=row_times(row, candidate), min_bytes=bench_case.min_bytes, flops=4 * kept * head_dim,
            copy_bytes_per_s=bandwidth["bytes_per_s"], provenance=where)
        record.update(case=case["case"], setting=dict(info), kind="sparsetir" if candidate else "baseline")
        note_candidate(record["setting"], candidate)
        records.append(record)
    return records


def run_attention_cases(bundle: Path, manifest: dict, out: Path, scratch: Path, assemble: Callable, *,
                        bandwidth: dict, timing, where: dict, deadline_s: float,
                        say: Callable[[str], None]) -> list[str]:
    """Every attention case of the bundle that fits before ``deadline_s`` (``time.monotonic()``), then the
    PrunedBERT weights; the record files, one per sequence length (and ``prunedbert.json``)."""
    section, device = manifest["attention"], manifest["device"]

    def failed(case: dict, reason: str) -> list[dict]:
        return [make_record(experiment="attention", op=_OP, device=device, dataset=case["case"],
                            feat=section["head_dim"], contender=ALL_CONTENDERS, status="failed", reason=reason,
                            provenance=where)]

    files = run_cases_in_turn(
        section["cases"], lambda case: run_attention_case(bundle, section, case, scratch, assemble, device=device,
                                                          bandwidth=bandwidth, timing=timing, where=where),
        out, family="attention", file_of=lambda case: f"records/attention/seq{case['seq']}.json",
        label_of=lambda case: case["case"], failed=failed, deadline_s=deadline_s, say=say)
    if section.get("prunedbert"):
        files += run_prunedbert_cases(bundle, manifest, out, scratch, assemble, bandwidth=bandwidth, timing=timing,
                                      where=where, deadline_s=deadline_s, say=say)
    return files


# ---------------------------------------------------------------- PrunedBERT: pruned weights x activations


def build_prunedbert_section(staging: Path, matrices: Sequence[str], *, tokens: int = 256,
                             formats: dict | None = None, target, seed: int, scratch: Path, store_library: Callable,
                             store_candidate_files: Callable, baselines: Sequence[str] | None = None,
                             say: Callable[[str], None] = lambda message: None) -> dict:
    """Compile ``ops.spmm`` for each DLMC weight in each format; the section's ``prunedbert`` part."""
    from ...backend import device_of, normalize_target  # noqa: PLC0415 - compile host only
    from ...data import masks as generators  # noqa: PLC0415 - compile host only (the mirror is here)
    from ...ops import compile_spmm  # noqa: PLC0415 - compile host only: the runner never imports this

    device = device_of(normalize_target(target))
    baselines = bundle_baselines(_PRUNEDBERT, baselines, device)
    cases = []
    for name in dict.fromkeys(matrices):
        started = time.perf_counter()
        W = generators.pruned_weight(name).astype(np.float32).tocsr()
        W.data = np.random.default_rng(seed).standard_normal(W.nnz).astype(np.float32)  # as the CPU benchmark
        relpath = f"inputs/prunedbert-{dataset_slug(name)}.npz"
        np.savez_compressed(staging / relpath, indptr=W.indptr, indices=W.indices, data=W.data,
                            shape=np.asarray(W.shape, dtype=np.int64))
        candidates = []
        for index, (contender, config) in enumerate(prunedbert_configs(device, formats, W.shape, tokens).items()):
            options = {key: value for key, value in config.items() if key not in ("format", "dtype")}
            kernel = compile_spmm(W, tokens, format=config["format"], target=target, dtype=candidate_dtype(config),
                                  **options)
            library, _ = store_library(staging, Path(kernel.function.library))
            manifest_rel, structure_rel = store_candidate_files(staging, kernel, scratch)
            candidates.append({"id": f"prunedbert-{dataset_slug(name)}-{index:02d}", "contender": contender,
                               "format": config["format"], "config": dict(config), "library": library,
                               "manifest": manifest_rel,
                               "structure": structure_rel, "compile_s": kernel.timings.get("compile_s"),
                               "convert_s": kernel.timings.get("convert_s")})
        cases.append({"case": name, "input": relpath, "shape": list(W.shape), "nnz": int(W.nnz),
                      "sparsity": 1.0 - W.nnz / (W.shape[0] * W.shape[1]), "candidates": candidates})
        say(f"prunedbert {name}: {len(candidates)} formats in {time.perf_counter() - started:.1f} s")
    return {"tokens": tokens, "seed": seed, "baselines": list(baselines), "cases": cases}


def prunedbert_configs(device: str, formats: dict | None, shape, tokens: int) -> dict:
    """Contender -> configuration (``format`` and options: ``block_kernel``, ``dtype``) of a weight of ``shape``:
    ``formats`` (default ``DEFAULT_PRUNEDBERT_FORMATS``; a value a format string or a configuration) and, on
    CUDA, the tensor-core ones that take the weight and the tokens (compile host only)."""
    from ...formats import parse_format  # noqa: PLC0415 - compile host only
    from ...schedule.staged_cuda import check_tensor_core_blocks  # noqa: PLC0415

    configs = {contender: {"format": value} if isinstance(value, str) else dict(value)
               for contender, value in (formats or DEFAULT_PRUNEDBERT_FORMATS).items()}
    if device == "cuda":
        for contender, config in TENSOR_CORE_PRUNEDBERT_CONFIGS.items():
            try:
                check_tensor_core_blocks(parse_format(config["format"]), tokens, config["dtype"], shape=shape)
            except ValueError:
                continue
            configs.setdefault(contender, dict(config))
    return configs


def run_prunedbert_case(bundle: Path, section: dict, case: dict, scratch: Path, assemble: Callable, *, device: str,
                        bandwidth: dict, timing, where: dict) -> list[dict]:
    """Check and time one weight's formats and the dense and CSR baselines; one record per contender."""
    import scipy.sparse as sp  # noqa: PLC0415 - only here

    with np.load(bundle / case["input"], allow_pickle=False) as arrays:
        A = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(arrays["shape"]))
    tokens = section["tokens"]
    bench_case = get_reference("spmm").make_case(A, tokens, np.random.default_rng(section["seed"]))
    rows, candidates = [], {}
    for candidate in case["candidates"]:
        candidates[candidate["contender"]] = candidate
        library = assemble(bundle, candidate, scratch)
        dtype = candidate_dtype(candidate.get("config", {}))
        B, check = bench_case.inputs[0], bench_case
        if dtype != "float32":  # the kernel holds A's values in dtype: the check is on both inputs rounded
            rounded = A.copy()
            rounded.data = rounded_to(A.data, dtype)
            B = rounded_to(B, dtype)
            check = half_precision_case(spmm_reference(rounded, B), dtype)
        rows.append(prepare(Row(candidate["contender"], "compile"), candidate_factory(library, B, device, dtype),
                            check))
    rows += [baseline_row(entry, bench_case, device, inputs=(A, *bench_case.inputs))
             for entry in declared.variants(_PRUNEDBERT, section["baselines"]).values()]
    time_rows("spmm", rows, bench_case, bandwidth["bytes_per_s"], timing, device)
    info = {"shape": case["shape"], "nnz": case["nnz"], "sparsity": case["sparsity"], "tokens": tokens}
    records = []
    for row in rows:
        status, reason = status_of(row)
        candidate = candidates.get(row.contender)
        record = make_record(
            experiment="prunedbert", op="spmm", device=device, dataset=case["case"], feat=tokens,
            contender=row.contender, status=status, reason=reason, stats=row.stats.to_dict() if row.stats else None,
            shape=list(A.shape), nnz=int(A.nnz),
            variant=_prunedbert_variant(candidate) if candidate else row.contender,
            times=row_times(row, candidate), min_bytes=bench_case.min_bytes, flops=2 * int(A.nnz) * tokens,
            copy_bytes_per_s=bandwidth["bytes_per_s"], provenance=where)
        record.update(case=case["case"], setting=dict(info), kind="sparsetir" if candidate else "baseline")
        records.append(record)
    return records


def _prunedbert_variant(candidate: dict) -> str:
    """``<format>[ block_kernel][ <dtype>]``: a PrunedBERT candidate's variant (a manifest without configs: the format)."""
    config = candidate.get("config") or {"format": candidate["format"]}
    kernel = " block_kernel" if config.get("block_kernel") else ""
    return f"{config['format']}{kernel}" + (f" {config['dtype']}" if "dtype" in config else "")


def run_prunedbert_cases(bundle: Path, manifest: dict, out: Path, scratch: Path, assemble: Callable, *,
                         bandwidth: dict, timing, where: dict, deadline_s: float,
                         say: Callable[[str], None]) -> list[str]:
    """Every PrunedBERT weight of the bundle that fits before ``deadline_s``; the record file."""
    section, device = manifest["attention"]["prunedbert"], manifest["device"]

    def failed(case: dict, reason: str) -> list[dict]:
        return [make_record(experiment="prunedbert", op="spmm", device=device, dataset=case["case"],
                            feat=section["tokens"], contender=ALL_CONTENDERS, status="failed", reason=reason,
                            provenance=where)]

    return run_cases_in_turn(
        section["cases"], lambda case: run_prunedbert_case(bundle, section, case, scratch, assemble, device=device,
                                                           bandwidth=bandwidth, timing=timing, where=where),
        out, family="prunedbert", file_of=lambda case: "records/attention/prunedbert.json",
        label_of=lambda case: case["case"], failed=failed, deadline_s=deadline_s, say=say)


def _build(staging: Path, settings: dict, **stores) -> dict:
    return build_attention_section(
        staging, settings.get("seqs", [4096]), masks=settings.get("masks"), batch=settings.get("batch", 1),
        heads=settings.get("heads", 12), head_dim=settings.get("head_dim", 64), block=settings.get("block", 16),
        dtype=settings.get("dtype", "float16"), limit=settings.get("limit", len(DEFAULT_ATTENTION_CONFIGS)),
        baselines=settings.get("baselines"), prunedbert=settings.get("prunedbert"), **stores)


PART = BundlePart("attention", "the attention candidates", _build, run_attention_cases, order=3)
