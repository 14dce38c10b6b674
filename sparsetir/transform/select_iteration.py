"""Pick the iteration a Stage I transform applies to."""

from __future__ import annotations

from ..ir import SparseFunction


def select_iteration(func: SparseFunction, iteration: str | None):
    """The iteration named ``iteration`` (or the only one) and its index."""
    if not isinstance(func, SparseFunction):
        raise TypeError(f"expected a SparseFunction, got {type(func).__name__}")
    if iteration is None:
        if len(func.iterations) != 1:
            names = [it.name for it in func.iterations]
            raise ValueError(f"function {func.name} has several iterations {names}; name one")
        return 0, func.iterations[0]
    for index, it in enumerate(func.iterations):
        if it.name == iteration:
            return index, it
    raise ValueError(f"function {func.name} has no iteration named {iteration!r}")


def replace_iteration(func: SparseFunction, index: int, new_iteration) -> SparseFunction:
    iterations = list(func.iterations)
    iterations[index] = new_iteration
    return func.with_iterations(iterations)
