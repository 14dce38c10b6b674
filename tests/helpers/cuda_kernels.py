"""CUDA test kernels built from the project's own IR, shared by the CUDA emulator and build tests.

The CSR SpMM is ``sparsetir.ops.spmm_function(CSR(), FEAT)`` scheduled by the project's CUDA
template (``sparsetir.backend.scheduled_module``): a warp of ``lanes`` threads per row,
``rows_per_block`` rows per block, each lane owning FEAT / 32 = 2 contiguous features.  Its host
PrimFunc is ``spmm(A, B, C, J_indptr, J_indices)``; its CUDA kernel is ``spmm_kernel``.
"""

from __future__ import annotations

import re

import numpy as np
import scipy.sparse as sp
import tvm

from sparsetir.backend import scheduled_module
from sparsetir.formats import CSR
from sparsetir.lower import lower
from sparsetir.ops import spmm_function

FEAT = 64
SPMM_FUNC = "spmm"  # the host PrimFunc (and the symbol a built library exposes)
SPMM_KERNEL = "spmm_kernel"  # the CUDA kernel TVM generates for it


def spmm_module(rows_per_block: int = 4) -> tvm.IRModule:
    """The CSR SpMM (FEAT features) scheduled for CUDA by the project's template."""
    return scheduled_module(spmm_function(CSR(), FEAT), "cuda", rows_per_block=rows_per_block)


def unscheduled_spmm_module() -> tvm.IRModule:
    """The same SpMM lowered but not scheduled: no thread bindings, so no CUDA device code."""
    return tvm.IRModule({SPMM_FUNC: lower(spmm_function(CSR(), FEAT))})


def random_csr(m: int, n: int, seed: int = 0) -> sp.csr_matrix:
    """Random float32/int32 CSR with empty rows at the start, the end and in between."""
    rng = np.random.default_rng(seed)
    degrees = rng.integers(0, min(12, n + 1), size=m)
    degrees[[0, 1, m // 2, m - 1]] = 0
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int32)
    indices = np.concatenate([np.sort(rng.choice(n, d, replace=False)) for d in degrees]).astype(np.int32)
    data = rng.standard_normal(indptr[-1]).astype(np.float32)
    return sp.csr_matrix((data, indices, indptr), shape=(m, n))


def kernel_param_names(cuda_source: str, kernel_name: str) -> list[str]:
    """The parameter names of ``kernel_name``, in order, read from its signature in the CUDA source."""
    match = re.search(r'extern "C" __global__ [^\n]*?\b' + re.escape(kernel_name) + r"\(([^)]*)\)", cuda_source)
    if match is None:
        raise ValueError(f"kernel {kernel_name} is not declared in the source")
    return [re.findall(r"\w+", param)[-1] for param in match.group(1).split(",") if param.strip()]


def spmm_kernel_args(cuda_source: str, A: sp.csr_matrix, B: np.ndarray, C: np.ndarray, **overrides) -> list:
    """The arguments of ``spmm_kernel`` for ``C = A @ B``, ordered as its signature says.

    ``overrides`` replace arguments by parameter name (e.g. ``J_indptr_ptr=...``).
    """
    by_name = {
        "A_ptr": A.data,
        "B_ptr": B,
        "C_ptr": C,
        "J_indptr_ptr": A.indptr,
        "J_indices_ptr": A.indices,
        "m": A.shape[0],
        **overrides,
    }
    names = kernel_param_names(cuda_source, SPMM_KERNEL)
    assert sorted(names) == sorted(by_name), f"{SPMM_KERNEL} parameters changed: {names}"
    return [by_name[name] for name in names]


class EmulatedFunction:
    """An exported CUDA function (``runtime.function.CompiledFunction``) run on the CUDA emulator
    (``sparsetir.testing.cuda_emulator``) from its own generated source, where no GPU is: what
    ``runtime.edge_softmax.forward``/``backward`` call (``invoke``). ``scheduled``: the function's
    scheduled module (``scheduled_module(function, "cuda")``), for the launch geometry. Its ``device`` is
    ``"cpu"``: the emulator reads and writes host arrays."""

    def __init__(self, scheduled: tvm.IRModule, function):
        self.scheduled, self.source, self.device = scheduled, function.source, "cpu"

    def invoke(self, bound, sizes):
        from sparsetir.testing.cuda_emulator import emulate_module

        arrays = {name: array.numpy() if hasattr(array, "numpy") else array for name, array in bound.items()}
        emulate_module(self.scheduled, self.source, arrays, sizes=sizes)


def emulated_edge_softmax_set(loaded):
    """A loaded CUDA edge_softmax set (``runtime.edge_softmax.load_kernels``), each function emulated: an
    ``EdgeSoftmaxKernels`` on host tensors (``runtime.edge_softmax.edge_softmax_aggregate`` takes it)."""
    from sparsetir.ops.edge_softmax import FUNCTIONS
    from sparsetir.runtime.edge_softmax import EdgeSoftmaxKernels

    options = {"negative_slope": loaded.negative_slope, "dropout": loaded.dropout}
    functions = {kind: EmulatedFunction(scheduled_module(FUNCTIONS[kind](loaded.heads, loaded.feat,
                                                                         **({} if kind == "aggregate" else options)),
                                                         "cuda"), loaded[kind]) for kind in FUNCTIONS}
    return EdgeSoftmaxKernels(functions, loaded.heads, loaded.feat, loaded.negative_slope, loaded.dropout,
                              loaded.dtype)
