"""What each op computes, as a float64 numpy/scipy reference: one declaration per op.

This layer sits at the bottom of the package (it imports numpy, scipy and ``sparsetir.runtime``
only), so a host with only the TVM runtime (the GPU bundle's runner) can check results too.
The op's compile side (``sparsetir.ops``) points at its declaration here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..registry import Registry


@dataclass(frozen=True)
class OpReference:
    """An op's semantics for checking and benchmarking.

    Parameters
    ----------
    name : str
        The op's name (``"spmm"``).
    make_case : callable
        ``make_case(A, feat, rng) -> Case``: seeded random dense operands for a scipy CSR ``A``.
    reference : callable
        ``reference(A, *inputs) -> Case``: the float64 result, its tolerance and the bytes model.
    flops : callable
        ``flops(nnz, feat) -> int``: useful floating-point operations.

    The baselines that compute the same thing are the libraries' own declarations (``baselines``:
    ``Variant(library_reference=True)``), read by the harness: this layer names none.
    """

    name: str
    make_case: Callable
    reference: Callable
    flops: Callable[[int, int], int]


_REFERENCES: Registry[OpReference] = Registry("op")


def register_reference(spec: OpReference) -> OpReference:
    """Add ``spec`` under its name (once)."""
    if not isinstance(spec, OpReference):
        raise TypeError(f"register_reference takes an OpReference, got {type(spec).__name__}")
    return _REFERENCES.register(spec.name, spec)


def get_reference(name: str) -> OpReference:
    """The reference of op ``name``; ``ValueError`` listing the known ones otherwise."""
    return _REFERENCES.get(name)


def reference_names() -> list[str]:
    """The ops with a reference, in registration order."""
    return _REFERENCES.names()
