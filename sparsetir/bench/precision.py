"""SpMM in float16 and bfloat16 (float32 accumulation) against float32, side by side.

    python -m sparsetir.bench.quick spmm --precision [--dataset all-benchmark] [--feat 64]

For each (dataset, feature size): sparsetir's CSR SpMM in float32, float16 and bfloat16 (torch
tensors in and out), and torch's own CSR SpMM in float32 and, where torch supports it on this
device, in bfloat16 and float16. Each result is checked against a float64 product of the same
rounded inputs (relative error <= 1e-2 for the half types, 1e-4 for float32) before the
contenders are timed interleaved by the one timer. The ratio column is each contender's median
over sparsetir float32's.
"""

from __future__ import annotations

import numpy as np

from ..timing import DEFAULT, time_interleaved
from .datasets import load_matrix

HALF_TOLERANCE, FLOAT_TOLERANCE = 1e-2, 1e-4


def contenders(A, B, torch, compile_spmm) -> dict:
    """name -> (run, result to check, or the reason it cannot run)."""
    out = {}
    indptr, indices = (torch.from_numpy(a.astype(np.int64)) for a in (A.indptr, A.indices))
    for dtype in ("float32", "float16", "bfloat16"):
        Bt = torch.from_numpy(B).to(getattr(torch, dtype))
        kernel = compile_spmm(A, B.shape[1], dtype=dtype)
        C = torch.empty((A.shape[0], B.shape[1]), dtype=Bt.dtype)
        out[f"sparsetir {dtype}"] = (lambda kernel=kernel, Bt=Bt, C=C: kernel(Bt, out=C), Bt)
        At = torch.sparse_csr_tensor(indptr, indices, torch.from_numpy(A.data).to(Bt.dtype), size=A.shape)
        try:
            torch.sparse.mm(At, Bt)
        except RuntimeError as error:
            out[f"torch {dtype}"] = (None, f"unavailable: {str(error).splitlines()[0]}")
        else:
            out[f"torch {dtype}"] = (lambda At=At, Bt=Bt: torch.sparse.mm(At, Bt), Bt)
    return out


def relative_error(result, A, B_rounded) -> float:
    reference = A.astype(np.float64) @ B_rounded.float().numpy().astype(np.float64)
    got = result.float().numpy().astype(np.float64)
    return float(np.abs(got - reference).max() / max(np.abs(reference).max(), 1e-30))


def main(datasets: list[str], feats: list[int], seed: int, timing=DEFAULT) -> int:
    """One table per (dataset, feat); returns 0 when every case ran."""
    import torch  # noqa: PLC0415 - after the CLI's thread settings (quick.main)

    from ..ops import compile_spmm  # noqa: PLC0415 - after the CLI's thread settings (quick.main)

    failed = 0
    for dataset in datasets:
        try:
            A = load_matrix(dataset, seed)
        except Exception as error:  # reported; the other datasets run
            print(f"\n{dataset}: unavailable: {type(error).__name__}: {error}")
            failed += 1
            continue
        for feat in feats:
            B = np.random.default_rng(seed).standard_normal((A.shape[1], feat), dtype=np.float32)
            runs, notes = {}, {}
            for name, (run, checked) in contenders(A, B, torch, compile_spmm).items():
                if run is None:
                    notes[name] = checked
                    continue
                error = relative_error(run(), A, checked)
                limit = FLOAT_TOLERANCE if name.endswith("float32") else HALF_TOLERANCE
                if error > limit:
                    notes[name] = f"wrong result: relative error {error:.2g} > {limit:g}"
                else:
                    runs[name], notes[name] = run, f"relative error {error:.1e}"
            stats = time_interleaved(runs, timing)
            base = stats["sparsetir float32"].median if "sparsetir float32" in stats else None
            print(f"\n{dataset} ({A.shape[0]:,} x {A.shape[1]:,}, {A.nnz:,} nnz), feat {feat}")
            print(f"{'contender':<20}{'median ms':>11}{'p20 ms':>9}{'p80 ms':>9}{'vs fp32':>9}  check")
            for name, note in notes.items():
                if name in stats:
                    s = stats[name]
                    ratio = f"{s.median / base:.2f}" if base else "-"
                    print(f"{name:<20}{s.median * 1e3:>11.3f}{s.p20 * 1e3:>9.3f}{s.p80 * 1e3:>9.3f}{ratio:>9}  {note}")
                else:
                    print(f"{name:<20}{'':>38}  {note}")
    return 1 if failed else 0
