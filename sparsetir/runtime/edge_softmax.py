"""GAT's fused attention (``edge_softmax_aggregate``) on exported kernels, with only the TVM runtime.

The op (``sparsetir.ops.edge_softmax``, which compiles) is three compiled functions per (heads,
features, slope, dropout, dtype, target): ``forward`` (scores, row softmax, dropout, aggregation),
``backward`` (the scores' gradient over the rows) and ``aggregate`` (the sources' gradients, over
the transposed structure). This module is the host side that runs them, shared by the op and by a
host without the compiler (the GPU bundle):

- :class:`EdgeSoftmaxStructure`: the CSR structure (adj_t: row = target) and its transpose, as the
  kernels take them;
- :func:`forward` and :func:`backward`: one call of the functions (``functions[kind].invoke``);
- :class:`EdgeSoftmaxKernels`: a set of the three, with its options; :func:`export_kernels` writes
  one (``<folder>/<kind>.so``, each manifest carrying a ``function`` spec, ``runtime.manifest``)
  and :func:`load_kernels` reads it back (``runtime.load``: digests, schema);
- :func:`edge_softmax_aggregate`: the op differentiable in ``x``, ``a_src`` and ``a_dst`` on a
  loaded set (a ``torch.autograd.Function``);
- :func:`with_self_loops`: PyG's self-loop rule on a CSR structure (``GATConv``'s).

Nothing here imports the compiler; torch is needed (the kernels' operands are tensors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .function import CompiledFunction

__all__ = ["FUNCTION_SPEC", "KINDS", "EdgeSoftmaxKernels", "EdgeSoftmaxStructure", "backward",
           "edge_softmax_aggregate", "export_kernels", "forward", "function_spec", "load_kernels", "with_self_loops"]

KINDS = ("forward", "backward", "aggregate")
FUNCTION_SPEC = "function"  # the manifest field describing an exported function of an op (runtime.manifest)
OP = "edge_softmax"


def function_spec(kind: str, heads: int, feat: int, *, negative_slope: float, dropout: bool, dtype: str) -> dict:
    """What an exported function of this op is (its manifest's ``function`` field)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    spec = {"op": OP, "kind": kind, "heads": int(heads), "feat": int(feat), "dtype": dtype}
    if kind != "aggregate":  # the aggregation over the transposed structure has neither option
        spec.update(negative_slope=float(negative_slope), dropout=bool(dropout))
    return spec


# ------------------------------------------------------------------------------------------ structure
def with_self_loops(indptr: np.ndarray, indices: np.ndarray, loops: int) -> tuple[np.ndarray, np.ndarray]:
    """PyG's ``remove_self_loops`` then ``add_self_loops`` on CSR: every entry ``(i, i)`` removed, then
    one ``(i, i)`` for ``i < loops`` appended to its row (each row's own entries first, as PyG appends)."""
    ptr, idx = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
    rows = np.repeat(np.arange(ptr.shape[0] - 1, dtype=np.int64), np.diff(ptr))
    keep = idx != rows
    loop_ids = np.arange(loops, dtype=np.int64)
    rows = np.concatenate([rows[keep], loop_ids])
    idx = np.concatenate([idx[keep], loop_ids])
    order = np.argsort(rows, kind="stable")
    new_ptr = np.zeros(ptr.shape[0], dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=ptr.shape[0] - 1), out=new_ptr[1:])
    return new_ptr, np.ascontiguousarray(idx[order])


@dataclass(frozen=True)
class EdgeSoftmaxStructure:
    """``m`` targets x ``n`` sources in CSR (int64 tensors on the kernels' device) and its transpose;
    entry ``p`` of the transpose is entry ``order[p]`` of the structure."""

    m: int
    n: int
    indptr: object
    indices: object
    t_indptr: object
    t_indices: object
    order: object

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    @classmethod
    def from_csr(cls, indptr, indices, num_sources: int, device="cpu", *, transposed=None) -> EdgeSoftmaxStructure:
        """From a CSR structure (numpy arrays or tensors, already checked); ``transposed``: its
        ``(t_indptr, t_indices, order)`` where the caller has them (otherwise a stable counting sort)."""
        import torch  # noqa: PLC0415 - the kernels' operands are tensors

        ptr = np.asarray(indptr.cpu() if hasattr(indptr, "cpu") else indptr, np.int64)
        idx = np.asarray(indices.cpu() if hasattr(indices, "cpu") else indices, np.int64)
        m, n = ptr.shape[0] - 1, int(num_sources)
        if transposed is None:
            order = np.argsort(idx, kind="stable")  # by source, then target (rows are in order)
            rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(ptr))
            t_ptr = np.zeros(n + 1, np.int64)
            np.cumsum(np.bincount(idx, minlength=n), out=t_ptr[1:])
            transposed = (t_ptr, rows[order], order)
        as_tensor = lambda a: torch.as_tensor(np.asarray(a, np.int64)).to(device)  # noqa: E731
        return cls(m, n, as_tensor(ptr), as_tensor(idx), *(as_tensor(a) for a in transposed))


# ------------------------------------------------------------------------------------------ the calls
def _invoke(functions: Mapping, kind: str, indptr, indices, sizes: dict, arrays: dict) -> None:
    functions[kind].invoke({**arrays, "J_indptr": indptr, "J_indices": indices}, sizes)


def forward(functions: Mapping, structure: EdgeSoftmaxStructure, x, a_src, a_dst, mask=None):
    """``(out (m, H, F), alpha (nnz, H))``: one call of ``functions["forward"]`` on contiguous operands
    (checked by the caller; ``mask`` exactly when the functions were compiled with dropout)."""
    m, (heads, feat) = structure.m, x.shape[1:]
    if structure.nnz == 0:  # every row is empty (and a kernel refuses zero-sized index arrays)
        return x.new_zeros((m, heads, feat)), x.new_zeros((0, heads))
    out, alpha = x.new_empty((m, heads, feat)), x.new_empty((structure.nnz, heads))
    arrays = {"X": x, "As": a_src, "Ad": a_dst, "P": alpha, "O": out}
    if mask is not None:
        arrays["Mk"] = mask
    _invoke(functions, "forward", structure.indptr, structure.indices,
            {"m": m, "n": structure.n, "nnz": structure.nnz}, arrays)
    return out, alpha


def backward(functions: Mapping, structure: EdgeSoftmaxStructure, x, a_src, a_dst, mask, out, alpha, grad):
    """``(d_x, d_src, d_dst)`` of :func:`forward` for ``grad`` (the gradient of ``out``): the scores'
    gradient over the rows (``backward``), then the sources' over the transpose (``aggregate``)."""
    m, n, nnz = structure.m, structure.n, structure.nnz
    heads, feat = x.shape[1:]
    if nnz == 0:
        return x.new_zeros((n, heads, feat)), x.new_zeros((n, heads)), x.new_zeros((m, heads))
    d_scores, d_dst = x.new_empty((nnz, heads)), x.new_empty((m, heads))
    arrays = {"dO": grad, "X": x, "O": out, "P": alpha, "As": a_src, "Ad": a_dst, "DZ": d_scores, "DAd": d_dst}
    if mask is not None:
        arrays["Mk"] = mask
    _invoke(functions, "backward", structure.indptr, structure.indices, {"m": m, "n": n, "nnz": nnz}, arrays)
    weights = alpha if mask is None else alpha * mask
    d_x, d_src = x.new_empty((n, heads, feat)), x.new_empty((n, heads))
    _invoke(functions, "aggregate", structure.t_indptr, structure.t_indices, {"m": n, "n": m, "nnz": nnz},
            {"W": weights.index_select(0, structure.order), "Z": d_scores.index_select(0, structure.order),
             "B": grad, "C": d_x, "S": d_src})
    return d_x, d_src, d_dst


# ------------------------------------------------------------------------------------------ exported sets
@dataclass(frozen=True)
class EdgeSoftmaxKernels(Mapping):
    """The three functions of one (heads, feat, negative_slope, dropout, dtype), by kind."""

    functions: dict
    heads: int
    feat: int
    negative_slope: float
    dropout: bool
    dtype: str

    def __getitem__(self, kind):
        return self.functions[kind]

    def __iter__(self):
        return iter(self.functions)

    def __len__(self):
        return len(self.functions)

    @property
    def device(self) -> str:
        return self.functions["forward"].device

    def spec(self, kind: str) -> dict:
        return function_spec(kind, self.heads, self.feat, negative_slope=self.negative_slope, dropout=self.dropout,
                             dtype=self.dtype)


def export_kernels(kernels: EdgeSoftmaxKernels, folder) -> dict[str, Path]:
    """Write ``<folder>/<kind>.so`` (with manifest, carrying the ``function`` spec, and source) for each kind."""
    folder = Path(folder)
    return {kind: kernels[kind].export(folder / f"{kind}.so", **{FUNCTION_SPEC: kernels.spec(kind)})
            for kind in KINDS}


def load_kernels(paths) -> EdgeSoftmaxKernels:
    """A set exported by :func:`export_kernels`: a folder, or ``{kind: library path}``. Each library is
    verified as ``runtime.load`` verifies it; a ValueError when one is not this op's, its kinds are
    missing, or their specs (heads, feat, slope, dropout, dtype, device) disagree."""
    if not isinstance(paths, Mapping):
        paths = {kind: Path(paths) / f"{kind}.so" for kind in KINDS}
    missing = [kind for kind in KINDS if kind not in paths]
    if missing:
        raise ValueError(f"an edge_softmax kernel set needs the kinds {list(KINDS)}; missing {missing}")
    functions, specs = {}, {}
    for kind in KINDS:
        function = CompiledFunction(paths[kind], verify=True)
        spec = function.manifest.get(FUNCTION_SPEC)
        if not isinstance(spec, dict) or spec.get("op") != OP or spec.get("kind") != kind:
            raise ValueError(f"{paths[kind]} is not the {kind!r} function of {OP} (its manifest's {FUNCTION_SPEC!r} "
                             f"is {spec!r}); export it with runtime.edge_softmax.export_kernels")
        functions[kind], specs[kind] = function, spec
    first = specs["forward"]
    for kind in KINDS[1:]:
        for field in ("heads", "feat", "dtype"):
            if specs[kind][field] != first[field]:
                raise ValueError(f"{paths[kind]}: {field} {specs[kind][field]!r} differs from the forward "
                                 f"function's {first[field]!r}")
    for field in ("negative_slope", "dropout"):
        if specs["backward"][field] != first[field]:
            raise ValueError(f"{paths['backward']}: {field} {specs['backward'][field]!r} differs from the forward "
                             f"function's {first[field]!r}")
    devices = {function.device for function in functions.values()}
    if len(devices) != 1:
        raise ValueError(f"the functions of one set run on one device, got {sorted(devices)}")
    return EdgeSoftmaxKernels(functions, first["heads"], first["feat"], first["negative_slope"], first["dropout"],
                              first["dtype"])


# ------------------------------------------------------------------------------------------ autograd
def _function_class():
    import torch  # noqa: PLC0415 - the runtime itself needs no torch

    class EdgeSoftmaxAggregate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, kernels, structure, x, a_src, a_dst, mask):
            out, alpha = forward(kernels, structure, x, a_src, a_dst, mask)
            ctx.save_for_backward(x, a_src, a_dst, mask, out, alpha)
            ctx.kernels, ctx.structure = kernels, structure
            ctx.mark_non_differentiable(alpha)
            return out, alpha

        @staticmethod
        def backward(ctx, grad_out, _grad_alpha):
            x, a_src, a_dst, mask, out, alpha = ctx.saved_tensors
            d_x, d_src, d_dst = backward(ctx.kernels, ctx.structure, x, a_src, a_dst, mask, out, alpha,
                                         grad_out.contiguous())
            needs = ctx.needs_input_grad
            return (None, None, d_x if needs[2] else None, d_src if needs[3] else None,
                    d_dst if needs[4] else None, None)

    return EdgeSoftmaxAggregate


_AUTOGRAD: list = []


def edge_softmax_aggregate(kernels: EdgeSoftmaxKernels, structure: EdgeSoftmaxStructure, x, a_src, a_dst,
                           mask=None):
    """The op on a loaded kernel set (``sparsetir.ops.edge_softmax_aggregate``'s semantics): ``(out,
    alpha)``, differentiable in ``x (n, H, F)``, ``a_src (n, H)`` and ``a_dst (m, H)``. ``mask (nnz,
    H)``: the attention dropout's multipliers, for a set compiled with dropout (one without a mask
    runs with none dropped). Every operand is checked first (a ValueError or TypeError)."""
    import torch  # noqa: PLC0415

    m, n, nnz = structure.m, structure.n, structure.nnz
    dtype = getattr(torch, kernels.dtype)
    shapes = {"x": (x, (n, kernels.heads, kernels.feat)), "a_src": (a_src, (n, kernels.heads)),
              "a_dst": (a_dst, (m, kernels.heads))}
    if mask is not None:
        if not kernels.dropout:
            raise ValueError("this kernel set was compiled without dropout; it takes no mask")
        shapes["mask"] = (mask, (nnz, kernels.heads))
    for name, (tensor, shape) in shapes.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(tensor).__name__}")
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name} must be {shape}, got shape {tuple(tensor.shape)}")
        if tensor.dtype != dtype:
            raise TypeError(f"{name} has dtype {tensor.dtype}; this kernel set runs in {kernels.dtype}")
        if (tensor.device.type == "cuda") != (kernels.device == "cuda"):
            raise ValueError(f"{name} is on {tensor.device}, but this kernel set runs on {kernels.device}")
    if kernels.dropout and mask is None:
        mask = x.new_ones((nnz, kernels.heads))
    if not _AUTOGRAD:
        _AUTOGRAD.append(_function_class())
    return _AUTOGRAD[0].apply(kernels, structure, x.contiguous(), a_src.contiguous(), a_dst.contiguous(),
                              None if mask is None else mask.detach().contiguous())

