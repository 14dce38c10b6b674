"""Checking a result against a float64 reference: the case an op is measured on, and its tolerance.

An op's reference (``registry.OpReference``) builds a :class:`Case` for a matrix (random dense
operands) and for given operands. The tuner, the benchmark and the GPU bundle all check every
contender's result with :func:`result_mismatch` before timing it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Entry-wise tolerance: TOLERANCE_ULPS * eps * sqrt(reduction length) * (|A| |B|), the
# statistical size of float32 rounding over a sum of that length, with a wide margin.
TOLERANCE_ULPS = 16.0
FLOAT32_EPS = float(np.finfo(np.float32).eps)


@dataclass
class Case:
    """One operation on one matrix: its dense inputs, a float64 reference and its tolerance,
    and the bytes a kernel must move at least (the DRAM model)."""

    inputs: tuple[np.ndarray, ...]
    reference: np.ndarray
    tolerance: np.ndarray
    min_bytes: int


def rounding_tolerance(magnitude: np.ndarray, reduction_length) -> np.ndarray:
    """The tolerance of a float32 sum of ``reduction_length`` terms whose magnitudes sum to ``magnitude``."""
    return TOLERANCE_ULPS * FLOAT32_EPS * np.sqrt(reduction_length) * magnitude + 1e-30


def host_array(result) -> np.ndarray:
    """A result as a float64 numpy array (from numpy, torch on any device, or cupy)."""
    if hasattr(result, "detach"):  # torch (which has no numpy bfloat16: widen it first, exactly)
        result = result.detach().cpu()
        result = (result.float() if str(result.dtype) == "torch.bfloat16" else result).numpy()
    elif hasattr(result, "get") and not isinstance(result, np.ndarray):  # cupy
        result = result.get()
    return np.asarray(result, dtype=np.float64)


def result_mismatch(got: np.ndarray, case: Case) -> str | None:
    """None when ``got`` matches the reference within tolerance, else what is wrong (one line)."""
    if got.shape != case.reference.shape:
        return f"wrong result: shape {got.shape}, expected {case.reference.shape}"
    excess = np.abs(got - case.reference) - case.tolerance
    if not np.isfinite(got).all() or (excess > 0).any():
        worst = np.unravel_index(np.nanargmax(np.where(np.isfinite(excess), excess, np.inf)), got.shape)
        return (
            f"wrong result: at {tuple(int(i) for i in worst)} got {got[worst]:.6g}, "
            f"expected {case.reference[worst]:.6g} (tolerance {case.tolerance[worst]:.2g})"
        )
    return None
