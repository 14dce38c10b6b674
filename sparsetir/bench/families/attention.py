"""Block-sparse attention and pruned-weight SpMM (PrunedBERT), on one timer (a :class:`Family` declaration).

    python -m sparsetir.bench attention --mask longformer --seq 1024 --heads 2 --head-dim 64

:func:`attention_case` times, for one block layout and operand shape, every sparsetir contender
(a format and knobs: ``ops.compile_sparse_attention``) and every baseline variant declared for
``sparse_attention`` (SDPA with the dense mask, FlexAttention with a ``BlockMask``, torch's CSR/BSR
tensors; Triton block-sparse on a GPU). :func:`prunedbert_case` does the same for ``W @ X`` with a
DLMC pruned weight ``W`` (``ops.spmm`` in the block formats BSR, DBSR and SR-BCRS, and CSR) against
the variants declared for ``prunedbert`` (dense ``torch.mm``: MKL; ``torch.sparse``): the family's
second input form.

The engine (``bench.family``) checks each result against the float64 reference (a relative error
within the dtype's tolerance) before timing; the contenders that pass are timed interleaved, the
cache flushed before every call. Setup is kept apart from kernel time: conversion and compile
seconds (for FlexAttention, ``torch.compile`` once per shape) are their own fields of the record.

Records follow ``sparsetir.bench.records`` (``dataset`` is the case name, ``feat`` the head
dimension or the token count; ``case`` the case name too) with the case's parameters under
``setting`` and the contender's ``kind``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ...reference import Case
from ...reference.case import host_array
from ...reference.sparse_attention import attention_reference, dense_mask
from ...timing import TimingPolicy
from ..family import Family, register
from ..records import provenance

__all__ = ["FAMILY", "PRUNEDBERT", "attention_case", "attention_operands", "prunedbert_case", "relative_error"]

PRUNEDBERT = "prunedbert"  # the second input form: a pruned weight times the activations


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


@dataclass
class AttentionInputs:
    q: object
    k: object
    v: object
    layout: np.ndarray
    block: int
    seq: int
    head_dim: int
    dtype: str
    device: str
    expected: np.ndarray
    tolerance: float


@dataclass
class PrunedInputs:
    W: object  # scipy CSR, float32, seeded values
    X: np.ndarray
    tokens: int
    device: str
    expected: np.ndarray
    tolerance: float = 1e-4


class Attention(Family):
    """Block-sparse attention and PrunedBERT (see the module docstring)."""

    name = "attention"
    op = "sparse_attention"
    title = "block-sparse attention"
    description = "block-sparse attention (BSR block 16, seq 4096, 12 heads, head dim 64, fp16) vs Triton blocksparse"
    baseline_key = "sparse_attention"
    form_keys = {PRUNEDBERT: PRUNEDBERT}
    baseline_variant_is_name = True
    quiet = True
    setup_is_conversion = False
    mask_kinds = ("longformer", "bigbird", "butterfly")
    contender_keys = ("format", "fuse_rows", "row_tile", "score_tile", "tensor_cores")

    def reference(self, inputs) -> Case:
        return Case((), inputs.expected, inputs.tolerance, 0)

    def check_config(self, section) -> None:
        """Known mask kinds and their arguments, a reference among the baselines, sequence lengths the
        block divides, known contender settings."""
        import inspect  # noqa: PLC0415 - only when a config is checked

        from ...data import masks as generators  # noqa: PLC0415

        for name, arguments in section["masks"].items():
            kind = (arguments or {}).get("kind", name)
            if kind not in self.mask_kinds:
                raise ValueError(f"attention.masks.{name}: unknown mask kind {kind!r}; known: {list(self.mask_kinds)}")
            accepted = set(inspect.signature(getattr(generators, kind)).parameters) - {"seq", "block"}
            unknown = sorted(set(arguments or {}) - accepted - {"kind"})
            if unknown:
                raise ValueError(f"attention.masks.{name}: {kind} takes {sorted(accepted)}, not {unknown}")
        for seq in section["seqs"]:
            if seq % section["block"]:
                raise ValueError(f"attention.seqs: {seq} is not a multiple of the block {section['block']}")
        if not set(section["reference"]) & set(section["baselines"]):
            raise ValueError(f"attention.reference names {section['reference']}, none of which attention.baselines "
                             "runs")
        for name, contender in section["sparsetir"].items():
            unknown = sorted(set(contender or {}) - set(self.contender_keys))
            if unknown:
                raise ValueError(f"attention.sparsetir.{name}: unknown setting(s) {unknown}; known: "
                                 f"{list(self.contender_keys)}")

    workflow = "cases"
    figures = {"attention": "attention_speedup.png", PRUNEDBERT: "prunedbert_speedup.png"}

    def data_needs(self, section) -> list:
        """PrunedBERT's DLMC weights (the masks are generated)."""
        names = [name if name.startswith("dlmc/") else f"dlmc/{name}"
                 for name in (section.get(PRUNEDBERT) or {}).get("matrices", [])]
        return self.registry_needs(names, PRUNEDBERT)

    def workflow_cases(self, settings) -> dict[str, dict]:
        """One job per sequence length (every mask in it)."""
        return {f"seq{int(seq)}": {"seq": int(seq)} for seq in settings["seqs"]}

    def workflow_extras(self, settings) -> dict[str, Mapping]:
        """PrunedBERT's weights, one job, where the section has ``prunedbert``."""
        return {PRUNEDBERT: settings[PRUNEDBERT]} if settings.get(PRUNEDBERT) else {}

    def workflow_extra(self, name, settings, *, timing, device, seed, threads, say) -> list[dict]:
        """PrunedBERT: ``W @ X`` for each of DLMC's pruned transformer weights (``prunedbert.matrices``, read
        through ``sparsetir.data.masks.pruned_weight``: DLMC's, or ``block-pruned/<rows>x<cols>/<block>/<sparsity>``,
        whole blocks kept), seeded values and a seeded ``X`` of ``tokens`` columns; each
        configured format and baseline checked against float64, then timed interleaved (:func:`prunedbert_case`)."""
        from ...data import masks  # noqa: PLC0415
        from ..records import make_record  # noqa: PLC0415

        section, records = settings[name], []
        for matrix in section["matrices"]:
            case = matrix.removeprefix("dlmc/")
            try:
                pattern = masks.pruned_weight(matrix)
            except Exception as error:  # noqa: BLE001 - a weight no route provides gets an unavailable row
                say(f"{name} {case}: unavailable: {error}")
                records.append({**make_record(experiment=name, op="spmm", device=device, dataset=case,
                                              feat=section["tokens"], contender="*", status="unavailable",
                                              reason=f"{type(error).__name__}: {error}"[:300],
                                              provenance=provenance(device=device, flush=timing.flush)),
                                "case": case, "setting": {}, "kind": "*"})
                continue
            say(f"{name} {case}: {pattern.shape[0]}x{pattern.shape[1]}, {pattern.nnz:,} non-zeros "
                f"({100 * (1 - pattern.nnz / (pattern.shape[0] * pattern.shape[1])):.1f}% sparse), "
                f"{section['tokens']} tokens")
            found = prunedbert_case(case=case, matrix=pattern, tokens=section["tokens"], formats=section["sparsetir"],
                                    baselines=section["baselines"], timing=timing, device=device, seed=seed)
            for record in found:
                outcome = f"{record['stats']['median'] * 1e3:9.3f} ms" if record["status"] == "ok" else record["reason"]
                say(f"  {record['contender']:<24} {outcome}")
            records += found
        return records

    def workflow_case(self, case, settings, *, timing, device, seed, threads, say) -> list[dict]:
        """Every mask at one sequence length (``case["seq"]``), in one process: FlexAttention's compile is
        paid once per shape and reported as its compile time."""
        from ...data import masks  # noqa: PLC0415

        seq, block, records = int(case["seq"]), settings["block"], []
        for name, arguments in settings["masks"].items():
            arguments = dict(arguments or {})
            layout = getattr(masks, arguments.pop("kind", name))(seq, block, **arguments)
            say(f"attention {name} seq {seq}: {layout.shape[0]}x{layout.shape[1]} blocks of {block}, "
                f"{100 * (1 - layout.mean()):.1f}% of them masked; {settings['heads']} heads, batch "
                f"{settings['batch']}, head dim {settings['head_dim']}, {threads} thread(s)")
            found = attention_case(
                case=f"{name}-seq{seq}", mask=name, layout=layout, block=block, batch=settings["batch"],
                heads=settings["heads"], seq=seq, head_dim=settings["head_dim"], dtype=settings.get("dtype", "float32"),
                contenders={k: dict(v or {}) for k, v in settings["sparsetir"].items()},
                baselines=settings["baselines"], options=settings.get("options") or {}, timing=timing,
                device=device, seed=seed)
            say(self.format_records(found))
            records += found
        return records

    def baseline_arguments(self, inputs, form=None) -> tuple:
        if isinstance(inputs, PrunedInputs):
            return inputs.W, inputs.X
        return inputs.q, inputs.k, inputs.v, inputs.layout, inputs.block

    def build_error(self, error: Exception) -> str:
        """A kernel or library that cannot run here is unavailable; any other failure failed."""
        why = "unavailable" if isinstance(error, (RuntimeError, ImportError)) else "failed"
        return f"{why}: {type(error).__name__}: {error}"

    def sparsetir_factory(self, inputs, *, format=None, tune_budget_s=None, form=None):
        """``run()`` of ``compile_sparse_attention`` (settings: format and knobs) or, for a pruned weight,
        of ``compile_spmm`` in the format string (or settings: format and knobs, e.g. ``block_kernel``),
        into a preallocated output; ``run.timings``."""
        target = "llvm" if inputs.device == "cpu" else "cuda"
        if isinstance(inputs, PrunedInputs):
            from ...ops import compile_spmm  # noqa: PLC0415 - the compiler loads after the thread settings

            started = time.perf_counter()
            knobs = dict(format) if isinstance(format, Mapping) else {"format": format}
            kernel = compile_spmm(inputs.W, inputs.tokens, target=target, **knobs)
            out = np.empty((inputs.W.shape[0], inputs.tokens), np.float32)

            def run():
                return kernel(inputs.X, out=out)

            run.timings = dict(kernel.timings)
            run.timings.setdefault("compile_s", time.perf_counter() - started)
            run.variant = format
            return run
        import torch  # noqa: PLC0415

        from ...ops import compile_sparse_attention  # noqa: PLC0415

        settings = dict(format or {})
        fmt = settings.pop("format", "bsr")
        kernel = compile_sparse_attention(inputs.layout, inputs.head_dim, block=inputs.block, format=fmt,
                                          dtype=inputs.dtype, target=target, seq=inputs.seq, **settings)
        out = torch.empty_like(inputs.q)

        def run():
            return kernel(inputs.q, inputs.k, inputs.v, out=out)

        run.timings, run.variant = dict(kernel.timings), fmt
        return run

    def mismatch(self, got, case: Case, run) -> tuple[str | None, dict]:
        """The relative error against the float64 reference, within the case's tolerance; a contender
        that computes something else on purpose (``run.same_result = False``: SDPA without the mask) is
        not judged."""
        error = relative_error(got, case.reference)
        if getattr(run, "same_result", True) and not error <= case.tolerance:
            return f"wrong result: relative error {error:.3g} > {case.tolerance:g}", {}
        return None, {"relative_error": error}

    def reference_names(self, rows, contenders):
        """The declared library references of attention and of the pruned-weight product."""
        import baselines  # noqa: PLC0415 - the baselines load after the thread settings

        return (*baselines.library_references(self.baseline_key), *baselines.library_references(PRUNEDBERT))

    def record_fields(self, row, contender, *, case: str, info: dict, **_) -> dict:
        setting = {**info, "relative_error": row.extra["relative_error"]} if row.stats is not None else info
        return {"case": case, "setting": setting, "kind": contender.kind, "speedup_vs_best": row.speedup_vs_best}

    # ------------------------------------------------------------ the command line

    def add_arguments(self, parser) -> None:
        parser.add_argument("--mask", action="append", choices=("longformer", "bigbird", "butterfly"),
                            help="block layout (repeatable; default longformer)")
        parser.add_argument("--seq", type=int, action="append", help="sequence length (repeatable; default 1024)")
        parser.add_argument("--heads", type=int, default=2, help="heads (default 2)")
        parser.add_argument("--head-dim", type=int, default=64, help="head dimension (default 64)")
        parser.add_argument("--block", type=int, default=16, help="the layout's block (default 16)")
        parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))

    def check_arguments(self, args) -> None:
        args.mask = args.mask or ["longformer"]
        args.seq = args.seq or [1024]
        args.formats = [fmt or "bsr" for fmt in args.formats]
        for seq in args.seq:
            if seq < 1 or seq % args.block:
                raise ValueError(f"--seq {seq} is not a positive multiple of the block {args.block}")

    def contenders(self, sparsetir_formats=(None,), baselines=None, **keywords):
        if not isinstance(sparsetir_formats, Mapping):  # the command line's format strings
            sparsetir_formats = {f"sparsetir-{fmt}": {"format": fmt} for fmt in sparsetir_formats}
        return super().contenders(sparsetir_formats, baselines, **keywords)

    def cli_cases(self, args, timing, contenders, say):
        from ...data import masks  # noqa: PLC0415

        for mask in args.mask:
            for seq in args.seq:
                yield f"{mask} seq {seq}", lambda mask=mask, seq=seq: attention_case(
                    case=f"{mask}-seq{seq}", mask=mask, layout=getattr(masks, mask)(seq, args.block),
                    block=args.block, batch=1, heads=args.heads, seq=seq, head_dim=args.head_dim, dtype=args.dtype,
                    contenders=contenders, baselines=None, timing=timing, seed=args.seed)


FAMILY = register(Attention())


def _records(rows, contenders, timing, device, **fields) -> list[dict]:
    where = provenance(device=device, flush=timing.flush, flush_bytes=timing.flush_bytes)
    by_name = {c.name: c for c in contenders}
    return [FAMILY.record(row, by_name[row.contender], provenance=where, device=device, **fields) for row in rows]


def attention_case(*, case: str, layout: np.ndarray, block: int, batch: int, heads: int, seq: int, head_dim: int,
                   contenders, baselines, timing: TimingPolicy, dtype: str = "float32", device: str = "cpu",
                   options: dict | None = None, seed: int = 0, tolerance: float | None = None,
                   mask: str | None = None) -> list[dict]:
    """Records for every contender of one attention case (see the module docstring).

    ``contenders``: name -> ``{"format": str, **knobs}`` (or built ``Contender`` objects, with
    ``baselines=None``); ``baselines``: the declared ``sparse_attention`` variants to run;
    ``options``: variant -> factory keyword arguments.
    """
    q, k, v = attention_operands(batch, heads, seq, head_dim, dtype, seed)
    expected = attention_reference(q.double(), k.double(), v.double(), layout, block)
    if device == "cuda":  # the reference on the host, the contenders on the GPU
        q, k, v = (x.to("cuda") for x in (q, k, v))
    tolerance = tolerance if tolerance is not None else (1e-5 if dtype == "float32" else 1e-2)
    inputs = AttentionInputs(q, k, v, layout, block, seq, head_dim, dtype, device, expected, tolerance)
    kept = int(dense_mask(np.asarray(layout, bool), block, seq, seq).sum())
    kept_pairs = kept * (1 if np.ndim(layout) == 3 else heads) * batch
    info = {"mask": mask or case, "block": block, "batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
            "dtype": dtype, "block_sparsity": 1.0 - float(np.asarray(layout, bool).mean()),
            "layout_per_head": bool(np.ndim(layout) == 3)}
    if isinstance(contenders, Mapping):
        contenders = FAMILY.contenders({name: dict(spec or {}) for name, spec in contenders.items()}, baselines or [],
                                       device=device, options=options)
    rows = FAMILY.check(contenders, inputs, FAMILY.reference(inputs))
    FAMILY.time(rows, timing, contenders)
    return _records(rows, contenders, timing, device, dataset=case, feat=head_dim, shape=[seq, seq], nnz=kept_pairs,
                    flops=4 * kept_pairs * head_dim, min_bytes=4 * q.numel() * q.element_size(), case=case, info=info)


def prunedbert_case(*, case: str, matrix, tokens: int, formats: dict, baselines: list, timing: TimingPolicy,
                    device: str = "cpu", seed: int = 0) -> list[dict]:
    """Records for ``W @ X``: W a pruned weight (scipy CSR), X ``(W.shape[1], tokens)`` float32."""
    W = matrix.astype(np.float32).tocsr()
    rng = np.random.default_rng(seed)
    W.data = rng.standard_normal(W.nnz).astype(np.float32)
    X = rng.standard_normal((W.shape[1], tokens)).astype(np.float32)
    inputs = PrunedInputs(W, X, tokens, device, W.astype(np.float64) @ X.astype(np.float64))
    info = {"shape": list(W.shape), "nnz": int(W.nnz), "sparsity": 1.0 - W.nnz / (W.shape[0] * W.shape[1]),
            "tokens": tokens}
    ours = [FAMILY.sparsetir_contender(fmt, name=name) for name, fmt in formats.items()]
    contenders = ours + FAMILY.baseline_contenders(baselines, device=device, key=PRUNEDBERT)
    rows = FAMILY.check(contenders, inputs, FAMILY.reference(inputs))
    FAMILY.time(rows, timing, contenders)
    return _records(rows, contenders, timing, device, dataset=case, feat=tokens, shape=list(W.shape), nnz=int(W.nnz),
                    flops=2 * int(W.nnz) * tokens, min_bytes=W.nnz * 8 + X.nbytes + W.shape[0] * tokens * 4,
                    experiment=PRUNEDBERT, op="spmm", case=case, info=info)
