"""The matrices the benchmark runs on: registry names and generator specs, as float32 canonical CSR."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from baselines.scipy_sparse import canonical_csr

from ..data import benchmark_graphs, generate, is_generated, load


def load_matrix(name: str, seed: int) -> sp.csr_matrix:
    """A float32 canonical CSR matrix: a generator spec (``synthetic:``, ``rmat:``, ``powerlaw:``;
    see :mod:`sparsetir.data.generators`) or a name from the dataset registry."""
    if is_generated(name):
        return canonical_csr(generate(name, seed), np.float32)
    return canonical_csr(load(name), np.float32)


def dataset_names(requested: list[str]) -> list[str]:
    """``requested`` with ``all-benchmark`` expanded to the benchmark graphs."""
    names = []
    for name in requested:
        names.extend(benchmark_graphs() if name == "all-benchmark" else [name])
    return names
