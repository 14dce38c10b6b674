"""Where a training epoch's time goes: sparse ops, dense ops and the rest, from ``torch.profiler``.

One epoch runs under the profiler (CPU activities); its operator tree is walked from the top:
an operator whose name is a sparse kernel (:data:`SPARSE`) counts its whole time as sparse, one
that is a dense product (:data:`DENSE`) as dense, and any other (``aten::linear``, a fused op,
an autograd node) is looked into, its children classified the same way. The rest is the epoch's
wall time minus both: elementwise ops, dropout, the loss, the optimiser, allocation, Python. The
split is the Amdahl limit beside a speedup: a contender whose sparse share is 10% gains at most
1.11x from a faster SpMM.

Sparse are sparsetir's kernels (``sparsetir::spmm*``, ``sddmm``, ``edge_softmax*``, ``rgms``),
torch's sparse kernels (``aten::_sparse*``, ``aten::sparse*``), the scatter/segment reductions
PyG's ``edge_index`` path aggregates with, ``torch_sparse``/``torch_scatter`` ops, and DGL's
``gspmm``/``gsddmm``, which run outside torch's operators: :func:`labelled_library_kernels`
wraps them in a ``record_function`` while an epoch is profiled (DGL's own names, ``dgl::``).
PyG's gather of messages along the edges (``aten::index_select``) is not told apart from other
gathers, so it falls in the rest.
"""

from __future__ import annotations

import contextlib
import sys
import time

__all__ = ["DENSE", "SPARSE", "classify", "epoch_split", "labelled_library_kernels", "profile_epoch"]

#: Operator-name prefixes counted as sparse.
SPARSE = ("sparsetir::spmm", "sparsetir::sddmm", "sparsetir::edge_softmax", "sparsetir::rgms", "aten::_sparse",
          "aten::sparse", "aten::scatter", "aten::index_add", "aten::segment_reduce", "aten::_segment_reduce",
          "torch_sparse::", "torch_scatter::", "dgl::")
#: Operator names counted as dense products.
DENSE = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "aten::mv", "aten::addmv",
         "aten::dot", "aten::_addmm_activation")


def classify(name: str) -> str | None:
    """``"sparse"``, ``"dense"`` or None (look into its children) for an operator name."""
    if name.startswith(SPARSE):
        return "sparse"
    if name in DENSE:
        return "dense"
    return None


def epoch_split(events, wall_s: float) -> dict:
    """``{"sparse", "dense", "rest"}`` shares of ``wall_s`` and ``profiled_ms`` from a profile's
    events (``torch.profiler.profile().events()``; each with ``name``, ``cpu_parent``,
    ``cpu_children`` and ``cpu_time_total`` in microseconds)."""
    totals = {"sparse": 0.0, "dense": 0.0}
    stack = [event for event in events if event.cpu_parent is None]
    while stack:
        event = stack.pop()
        kind = classify(event.name)
        if kind is not None:
            totals[kind] += event.cpu_time_total * 1e-6
        else:
            stack.extend(event.cpu_children)
    wall_s = max(wall_s, totals["sparse"] + totals["dense"], 1e-12)
    shares = {kind: seconds / wall_s for kind, seconds in totals.items()}
    shares["rest"] = max(0.0, 1.0 - shares["sparse"] - shares["dense"])
    return {**{k: round(v, 4) for k, v in shares.items()}, "profiled_ms": round(wall_s * 1e3, 3)}


@contextlib.contextmanager
def labelled_library_kernels():
    """While inside: DGL's SpMM/SDDMM (``dgl.backend.pytorch.sparse._gspmm``/``_gsddmm``, forward and
    backward) each inside a ``record_function`` named ``dgl::gspmm``/``dgl::gsddmm``, so a profile
    sees them; restored on exit. Nothing happens where DGL is not loaded."""
    import torch  # noqa: PLC0415 - the profiler's caller has torch

    module = sys.modules.get("dgl.backend.pytorch.sparse")
    originals = {}
    if module is not None:
        for name in ("_gspmm", "_gsddmm"):
            original = getattr(module, name, None)
            if original is not None:
                originals[name] = original
                setattr(module, name, _labelled(original, "dgl::" + name.lstrip("_"), torch))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(module, name, original)


def _labelled(function, label: str, torch):
    def labelled(*args, **kwargs):
        with torch.autograd.profiler.record_function(label):
            return function(*args, **kwargs)
    return labelled


def profile_epoch(step) -> dict:
    """Run ``step()`` (one epoch) under the CPU profiler and return its :func:`epoch_split`."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415 - only when profiling

    with labelled_library_kernels(), profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        step()
        wall_s = time.perf_counter() - started
    return epoch_split(prof.events(), wall_s)
