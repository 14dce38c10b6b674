"""Search spaces, strategies, the fingerprint and the compile workers' deadline."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.formats import parse_format, read_sparse_input
from sparsetir.formats.hyb import TUNING_MAX_SUB_FORMATS as MAX_SUB_FORMATS
from sparsetir.tune.fingerprint import degree_histogram, fingerprint
from sparsetir.tune.measure import Measurer
from sparsetir.tune.search import Search
from sparsetir.tune.space import SearchSpace, config_key, format_choices, search_space


def _input(A):
    return read_sparse_input(A, canonical=True)


def test_degree_histogram_bins_by_log2():
    indptr = np.cumsum([0, 0, 1, 2, 3, 4, 8, 9])  # degrees 0, 1, 2, 3, 4, 8, 9
    assert degree_histogram(indptr) == [1, 1, 2, 1, 2]
    assert degree_histogram(np.array([0])) == []
    A = sp.random(40, 30, density=0.1, format="csr", random_state=1)
    assert fingerprint(_input(A)) == {"shape": [40, 30], "nnz": A.nnz, "degree_histogram": degree_histogram(A.indptr)}


def test_format_choices_follow_the_matrix():
    random = _input(sp.random(2000, 2000, density=0.002, format="csr", random_state=3))
    choices = format_choices(random, "spmm")
    assert choices[0] == "csr"
    assert any(c.startswith("ell:") for c in choices) and not any(c.startswith("hyb") for c in choices)
    assert any(c.startswith("hyb:1:") for c in format_choices(random, "spmm", "cuda"))  # a GPU format
    assert not any(c.startswith("bsr") for c in choices)  # scattered entries: blocks would be nearly empty
    for choice in choices:
        fmt = parse_format(choice)  # every choice parses
    for choice in format_choices(random, "spmm", "cuda"):
        fmt = parse_format(choice)
        if fmt.name == "hyb":
            assert fmt.col_parts * len(fmt.buckets) <= MAX_SUB_FORMATS
    blocky = _input(sp.block_diag([np.ones((8, 8), np.float32)] * 50, format="csr"))
    assert {"bsr:4", "bsr:8"} <= set(format_choices(blocky, "spmm"))
    assert format_choices(_input(sp.csr_matrix((5, 5), dtype=np.float32)), "spmm") == ["csr"]


def test_space_default_neighbours_and_validity():
    space = search_space("spmm", _input(sp.random(500, 500, density=0.01, format="csr", random_state=0)), "cpu")
    default = space.default()
    assert default["format"] == "csr" and default["unroll"] == 16 and default["vector_width"] is None
    candidates = list(space.candidates())
    assert candidates[0] == default and len(candidates) == space.size()
    assert len({config_key(c) for c in candidates}) == len(candidates)
    assert not space.valid({**default, "horizontal_fuse": True})  # CSR has no sub-formats to fuse
    assert space.valid({**default, "format": "hyb:1:1,2,4", "horizontal_fuse": True})
    assert not space.valid({**default, "format": "hyb:2:1,2,4", "horizontal_fuse": True})  # rows shared
    for neighbour in space.neighbours(default):
        assert sum(neighbour[k] != default[k] for k in default) == 1 and space.valid(neighbour)
    with pytest.raises(ValueError, match="no search space"):
        search_space("spmv", _input(sp.eye(3, format="csr")), "cpu")


@pytest.mark.parametrize("strategy", ["exhaustive", "random", "evolutionary"])
def test_strategies_propose_unseen_candidates_default_first(strategy):
    space = search_space("spmm", _input(sp.random(300, 300, density=0.02, format="csr", random_state=2)), "cpu")
    search = Search(space, strategy, seed=1)
    seen, batch = set(), search.propose(5)
    assert batch[0] == space.default()
    while batch and len(seen) < 60:
        for config in batch:
            assert space.valid(config)
            key = config_key(config)
            assert key not in seen
            seen.add(key)
            search.tell(config, float(len(key)))  # any deterministic score
        batch = search.propose(5)
    assert len(seen) >= min(60, space.size())


def test_auto_strategy_is_exhaustive_only_on_small_spaces():
    space = search_space("spmm", _input(sp.random(300, 300, density=0.02, format="csr", random_state=2)), "cpu")
    assert Search(space, "auto", trials=10_000).strategy == "exhaustive"
    assert Search(space, "auto", trials=5).strategy == "evolutionary"
    with pytest.raises(ValueError, match="strategy"):
        Search(space, "greedy")


@pytest.mark.slow
def test_compile_deadline_kills_the_workers_and_the_next_batch_starts_fresh():
    A = sp.random(200, 200, density=0.05, format="csr", random_state=4, dtype=np.float32)
    measurer = Measurer("spmm", A, 8, "float32", {"kind": "llvm"}, workers=1)
    try:
        late = measurer.compile([{"format": "csr"}], deadline=time.monotonic())
        assert late[0][1] == "compile timed out (tuning budget spent)"
        assert measurer._processes == []
        results = measurer.measure([{"format": "csr"}, {"format": "hyb:1:1,2"}, {"format": "bsr:0"}])
        assert [r.error is None for r in results] == [True, True, False]
        assert "block" in results[2].error and results[2].median_s is None
        assert all(r.median_s > 0 for r in results[:2])
    finally:
        measurer.close()


def test_sddmm_space_searches_the_reduction_and_fusion_knobs():
    space = search_space("sddmm", _input(sp.random(400, 400, density=0.02, format="csr", random_state=5)), "cpu")
    assert {"reduce_lanes", "sparse_fuse"} <= set(space.knobs)
    assert space.valid({**space.default(), "sparse_fuse": True})
    assert not space.valid({**space.default(), "format": "ell:8", "sparse_fuse": True})  # CSR only
    assert all(parse_format(c["format"]).name in ("csr", "rcsr", "ell", "bsr", "hyb", "rcm") for c in space.candidates())


def test_rcsr_and_prefetch_are_in_the_cpu_spaces():
    from sparsetir.runtime.loader import usable_cores

    matrix = _input(sp.random(400, 400, density=0.02, format="csr", random_state=6))
    for op in ("spmm", "sddmm"):
        space = search_space(op, matrix, "cpu")
        assert f"rcsr:{usable_cores()}" in space.formats and 0 in space.knobs["prefetch"]
    assert search_space("sddmm", matrix, "cpu").default()["prefetch"] == 16  # the CSR SDDMM default


def test_exhaustive_search_proposes_every_candidate_exactly_once():
    space = SearchSpace("spmm", "cpu", ["csr", "ell:4", "ell:8"], {"unroll": (16, 4)})
    search = Search(space, "exhaustive")
    proposed, batch = [], search.propose(4)
    while batch:
        proposed += batch
        batch = search.propose(4)
    assert sorted(map(config_key, proposed)) == sorted(map(config_key, space.candidates()))
    assert len(proposed) == 6
