"""Benchmark of block-sparse attention and of pruned-weight SpMM (PrunedBERT), on one timer.

``attention_case`` times, for one block layout and operand shape, every sparsetir contender
(a format and knobs: ``ops.compile_sparse_attention``) and every baseline variant of
``baselines.torch_attention`` (SDPA with the dense mask, FlexAttention with a ``BlockMask``,
torch's CSR/BSR tensors; Triton block-sparse on a GPU). Each result is first checked against
the float64 reference; the contenders that pass are timed interleaved, the cache flushed before
every call. Setup is kept apart from kernel time: conversion and compile seconds (for
FlexAttention, ``torch.compile`` once per shape) are their own fields of the record.

``prunedbert_case`` does the same for ``W @ X`` with a DLMC pruned weight ``W`` (``ops.spmm`` in
the block formats BSR, DBSR and SR-BCRS, and CSR) against dense ``torch.mm`` (MKL) and
``torch.sparse``.

Records follow ``sparsetir.bench.records`` (``dataset`` is the case name, ``feat`` the head
dimension or the token count; ``case`` the case name too) with the case's parameters under
``setting``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from ..reference.case import host_array
from ..reference.sparse_attention import attention_reference, dense_mask
from ..timing import TimingPolicy, time_interleaved
from .records import make_record, provenance

OP = "sparse_attention"
PRUNEDBERT = "prunedbert"  # the baselines declared for a pruned weight times the activations


def relative_error(got, expected: np.ndarray) -> float:
    """``max |got - expected| / max |expected|`` (float64); inf when ``got`` is not finite."""
    got = host_array(got)
    if got.shape != expected.shape or not np.isfinite(got).all():
        return float("inf")
    scale = float(np.abs(expected).max()) or 1.0
    return float(np.abs(got - expected).max() / scale)


def attention_operands(batch: int, heads: int, seq: int, head_dim: int, dtype: str, seed: int):
    """Seeded standard-normal q, k, v as torch tensors of ``dtype``."""
    import torch  # noqa: PLC0415 - after the thread settings (sparsetir.bench.threads)

    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, seq, head_dim, generator=generator).to(getattr(torch, dtype))
            for _ in range(3)]


def attention_case(*, case: str, layout: np.ndarray, block: int, batch: int, heads: int, seq: int, head_dim: int,
                   contenders: dict, baselines: list, timing: TimingPolicy, dtype: str = "float32",
                   device: str = "cpu", options: dict | None = None, seed: int = 0, tolerance: float | None = None,
                   mask: str | None = None) -> list[dict]:
    """Records for every contender of one attention case (see the module docstring).

    ``contenders``: name -> ``{"format": str, **knobs}``; ``baselines``: the declared
    ``sparse_attention`` variants to run (``baselines.variants``); ``options``: variant -> factory
    keyword arguments.
    """
    from ..ops import compile_sparse_attention  # noqa: PLC0415 - the compiler loads after the thread settings

    q, k, v = attention_operands(batch, heads, seq, head_dim, dtype, seed)
    expected = attention_reference(q.double(), k.double(), v.double(), layout, block)
    if device == "cuda":  # the reference on the host, the contenders on the GPU
        q, k, v = (x.to("cuda") for x in (q, k, v))
    tolerance = tolerance if tolerance is not None else (1e-5 if dtype == "float32" else 1e-2)
    kept = int(dense_mask(np.asarray(layout, bool), block, seq, seq).sum())
    kept_pairs = kept * (1 if np.ndim(layout) == 3 else heads) * batch
    info = {"mask": mask or case, "block": block, "batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
            "dtype": dtype, "block_sparsity": 1.0 - float(np.asarray(layout, bool).mean()),
            "layout_per_head": bool(np.ndim(layout) == 3)}
    flops = 4 * kept_pairs * head_dim
    min_bytes = 4 * q.numel() * q.element_size()
    outcomes = {}
    for name, settings in contenders.items():
        settings = dict(settings)
        fmt = settings.pop("format", "bsr")
        try:
            kernel = compile_sparse_attention(layout, head_dim, block=block, format=fmt, dtype=dtype,
                                              target="llvm" if device == "cpu" else "cuda", seq=seq, **settings)
            out = _empty_like(q)

            def run(kernel=kernel, out=out):
                return kernel(q, k, v, out=out)

            run.timings = dict(kernel.timings)
            outcomes[name] = ("sparsetir", fmt, run)
        except Exception as error:  # noqa: BLE001 - every failure becomes the contender's record
            outcomes[name] = ("sparsetir", fmt, error)
    for name in baselines:
        outcomes[name] = ("baseline", name, _build_baseline(OP, name, device, (q, k, v, layout, block),
                                                            (options or {}).get(name, {})))
    prov = provenance(device=device, flush=timing.flush, flush_bytes=timing.flush_bytes)
    records, timed = [], {}
    for name, (kind, variant, run) in outcomes.items():
        base = dict(experiment="attention", op="sparse_attention", device=device, dataset=case, feat=head_dim,
                    contender=name, provenance=prov, variant=variant, shape=[seq, seq], nnz=kept_pairs,
                    flops=flops, min_bytes=min_bytes)
        if isinstance(run, Exception):
            status = "unavailable" if isinstance(run, (RuntimeError, ImportError)) else "failed"
            records.append({**make_record(**base, status=status, reason=_reason(run)), "case": case, "setting": info,
                            "kind": kind})
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            error = relative_error(run(), expected)
        if getattr(run, "same_result", True) and not error <= tolerance:
            records.append({**make_record(**base, status="wrong", times=run.timings,
                                          reason=f"wrong result: relative error {error:.3g} > {tolerance:g}"),
                            "case": case, "setting": info, "kind": kind})
            continue
        timed[name] = (run, base, kind, error)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = time_interleaved({name: entry[0] for name, entry in timed.items()}, timing) if timed else {}
    for name, (run, base, kind, error) in timed.items():
        record = make_record(**base, status="ok", stats=stats[name].to_dict(), times=run.timings)
        records.append({**record, "case": case, "setting": {**info, "relative_error": error}, "kind": kind})
    return records


def prunedbert_case(*, case: str, matrix, tokens: int, formats: dict, baselines: list, timing: TimingPolicy,
                    device: str = "cpu", seed: int = 0) -> list[dict]:
    """Records for ``W @ X``: W a pruned weight (scipy CSR), X ``(W.shape[1], tokens)`` float32."""
    from ..ops import compile_spmm  # noqa: PLC0415 - the compiler loads after the thread settings

    W = matrix.astype(np.float32).tocsr()
    rng = np.random.default_rng(seed)
    W.data = rng.standard_normal(W.nnz).astype(np.float32)
    X = rng.standard_normal((W.shape[1], tokens)).astype(np.float32)
    expected = W.astype(np.float64) @ X.astype(np.float64)
    info = {"shape": list(W.shape), "nnz": int(W.nnz), "sparsity": 1.0 - W.nnz / (W.shape[0] * W.shape[1]),
            "tokens": tokens}
    runs = {}
    for name, fmt in formats.items():
        try:
            started = time.perf_counter()
            kernel = compile_spmm(W, tokens, format=fmt, target="llvm" if device == "cpu" else "cuda")
            out = np.empty((W.shape[0], tokens), np.float32)

            def run(kernel=kernel, out=out):
                return kernel(X, out=out)

            run.timings = dict(kernel.timings)
            run.timings.setdefault("compile_s", time.perf_counter() - started)
            runs[name] = ("sparsetir", fmt, run)
        except Exception as error:  # noqa: BLE001
            runs[name] = ("sparsetir", fmt, error)
    for name in baselines:
        run = _build_baseline(PRUNEDBERT, name, device, (W, X), {})
        if not isinstance(run, Exception):
            run.timings = {}
        runs[name] = ("baseline", name, run)
    prov = provenance(device=device, flush=timing.flush, flush_bytes=timing.flush_bytes)
    records, timed = [], {}
    for name, (kind, variant, run) in runs.items():
        base = dict(experiment="prunedbert", op="spmm", device=device, dataset=case, feat=tokens, contender=name,
                    provenance=prov, variant=variant, shape=list(W.shape), nnz=int(W.nnz),
                    flops=2 * int(W.nnz) * tokens, min_bytes=W.nnz * 8 + X.nbytes + W.shape[0] * tokens * 4)
        if isinstance(run, Exception):
            status = "unavailable" if isinstance(run, (RuntimeError, ImportError)) else "failed"
            records.append({**make_record(**base, status=status, reason=_reason(run)), "case": case, "setting": info,
                            "kind": kind})
            continue
        error = relative_error(run(), expected)
        if not error <= 1e-4:
            records.append({**make_record(**base, status="wrong", times=run.timings,
                                          reason=f"wrong result: relative error {error:.3g}"), "case": case, "setting": info,
                            "kind": kind})
            continue
        timed[name] = (run, base, kind)
    stats = time_interleaved({name: entry[0] for name, entry in timed.items()}, timing) if timed else {}
    for name, (run, base, kind) in timed.items():
        records.append({**make_record(**base, status="ok", stats=stats[name].to_dict(), times=run.timings),
                        "case": case, "setting": info, "kind": kind})
    return records


def _build_baseline(key: str, name: str, device: str, inputs: tuple, options: dict):
    """The declared baseline ``name`` of ``key`` built on ``inputs``, or the exception that says why not
    (``RuntimeError``: it cannot run here; ``ValueError``: no such variant)."""
    import baselines  # noqa: PLC0415 - the baselines load after the thread settings

    try:
        entry = baselines.baseline(key, name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return entry.build(*inputs, device=device, **options)
    except Exception as error:  # noqa: BLE001 - every failure becomes the contender's record
        return error


def _empty_like(tensor):
    import torch  # noqa: PLC0415 - after the thread settings

    return torch.empty_like(tensor)


def _reason(error: Exception) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()[0]
    return text[:300]
