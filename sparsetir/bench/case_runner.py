"""One benchmark case as the workflow runs it: every contender on one (op, matrix, feature size).

It composes the pieces of :mod:`sparsetir.bench.engine` (contender preparation and
correctness check, timing) with the op's reference (case, flops) and turns each contender's outcome into a validated result record
(:mod:`sparsetir.bench.records`). A contender that cannot be built, fails, or computes a wrong
result gets a record saying so; it never stops the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from ..reference import get_reference
from ..timing import CUDA_FLUSH_BYTES, TimingPolicy, time_cuda
from .engine import (
    KernelFactory,
    Row,
    contender_rows,
    measure_copy_bandwidth,
    time_rows,
    variant_name,
)
from .records import ALL_CONTENDERS, make_record, provenance

__all__ = ["REASON_CHARS", "flops", "measure_bandwidth", "run_case", "short_reason", "status_of", "unavailable_records"]


def flops(op: str, nnz: int, feat: int) -> int:
    """Useful floating-point operations of ``op`` (its reference's flops model)."""
    return get_reference(op).flops(nnz, feat)


#: Reasons are kept to one line of at most this many characters (a TVM error can hold a whole IR dump).
REASON_CHARS = 400


def short_reason(text: str) -> str:
    """``text`` on one line, cut to :data:`REASON_CHARS` characters."""
    line = " ".join(part.strip() for part in text.strip().splitlines()[:3] if part.strip())
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def status_of(row: Row) -> tuple[str, str | None]:
    """A contender row's record status and (one-line) reason."""
    if row.stats is not None:
        return "ok", None
    error = short_reason(row.error or "not timed")
    if error.startswith("unavailable"):
        return "unavailable", error
    if error.startswith("wrong result"):
        return "wrong", error
    return "failed", error


def measure_bandwidth(timing: TimingPolicy, device: str) -> dict:
    """Copy bandwidth in this run: the CPU's (2x LLC copy) or the GPU's (256 MiB device copy)."""
    if device == "cpu":
        return measure_copy_bandwidth(timing)
    import torch  # noqa: PLC0415 - only on a GPU host, after the thread settings

    size = CUDA_FLUSH_BYTES
    source = torch.ones(size, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    stats = time_cuda(lambda: target.copy_(source), timing, samples=min(timing.samples, 30))
    return {"bytes": 2 * size, "bytes_per_s": 2 * size / stats.median, "method": "torch copy_ on the GPU",
            "stats": {"copy_": stats.to_dict()}}


def _times(row: Row) -> dict:
    if row.timings:
        return {"convert_s": row.timings.get("convert_s"), "compile_s": row.timings.get("compile_s"),
                "tune_s": row.timings.get("tune_s"), "setup_s": row.setup_s}
    return {"convert_s": row.setup_s, "compile_s": None, "tune_s": None, "setup_s": row.setup_s}


def run_case(
    *,
    experiment: str,
    op: str,
    dataset: str,
    matrix: sp.csr_matrix,
    feat: int,
    sparsetir_formats: Mapping[str, str | dict],
    timing: TimingPolicy,
    kernel_factory: KernelFactory | None = None,
    baseline_names: Sequence[str] | None = None,
    options: Mapping[str, Mapping] | None = None,
    exclude: Sequence[str] = (),
    device: str = "cpu",
    seed: int = 0,
    bandwidth: dict | None = None,
) -> list[dict]:
    """Prepare, check and time every contender; return one record per contender.

    ``kernel_factory`` builds the sparsetir contenders (the op's ``OpSpec.benchmark_kernel``);
    ``baseline_names``: the libraries or variants to run (``baselines.variants``; default every library
    that declares ``op``); ``timing`` is the policy every contender is timed under.
    """
    reference = get_reference(op)  # a ValueError naming the known ops
    if not isinstance(feat, int) or feat < 1:
        raise ValueError(f"feat must be a positive integer, got {feat!r}")
    case = reference.make_case(matrix, feat, np.random.default_rng(seed))
    rows = contender_rows(op, matrix, case, sparsetir_formats, set(exclude), kernel_factory=kernel_factory,
                          baseline_names=baseline_names, device=device, options=options)
    bandwidth = bandwidth or measure_bandwidth(timing, device)
    time_rows(op, rows, case, bandwidth["bytes_per_s"], timing, device)
    where = provenance(device=device, flush=timing.flush,
                       extra={"timing": timing.to_dict(), "copy_bandwidth": {k: bandwidth[k] for k in ("bytes", "bytes_per_s", "method")}})
    variants = {name: variant_name(spec) for name, spec in sparsetir_formats.items()}
    records = []
    for row in rows:
        status, reason = status_of(row)
        records.append(make_record(
            experiment=experiment, op=op, device=device, dataset=dataset, feat=feat, contender=row.contender,
            status=status, reason=reason, stats=row.stats.to_dict() if row.stats else None,
            shape=matrix.shape, nnz=int(matrix.nnz), variant=variants.get(row.contender),
            times=_times(row), min_bytes=case.min_bytes, flops=flops(op, int(matrix.nnz), feat),
            copy_bytes_per_s=bandwidth["bytes_per_s"], provenance=where,
        ))
    return records


def unavailable_records(*, experiment: str, op: str, dataset: str, feats: Sequence[int], reason: str,
                        device: str = "cpu") -> list[dict]:
    """One ``"*"`` record per feature size for a case that could not run at all (e.g. no dataset)."""
    reason = short_reason(reason if reason.startswith("unavailable") else f"unavailable: {reason}")
    where = provenance(device=device, flush=False)
    return [make_record(experiment=experiment, op=op, device=device, dataset=dataset, feat=feat,
                        contender=ALL_CONTENDERS, status="unavailable", reason=reason, provenance=where)
            for feat in feats]
