"""lower_sparse_buffer (Stage II -> III): an ordinary s_tir PrimFunc over flat buffers."""

from __future__ import annotations

import json

import tvm
from stage1_examples import csr_spmm, masked_product
from tvm import s_tir

from sparsetir.lower import SIGNATURE_ATTR, lower_sparse_buffer, lower_sparse_iter


def test_spmm_stage3_indexes_flat_buffers_by_chain_offsets():
    func, _ = csr_spmm()
    prim = lower_sparse_buffer(lower_sparse_iter(func))
    script = prim.script()
    assert 'A: T.Buffer(("nnz",), "float32", align=16)' in script, "A's values are one flat dimension"
    assert '"m", 64)' in script, "C stays a dense (m, feat) buffer"
    assert "C[vi, vk] = C[vi, vk] + A[J_indptr[vi] + vj] * B[J_indices[J_indptr[vi] + vj], vk]" in script
    assert '"tirx.noalias": True' in script


def test_stage3_is_schedulable_and_round_trips_through_tvmscript():
    func, _ = csr_spmm()
    prim = lower_sparse_buffer(lower_sparse_iter(func))
    sch = s_tir.Schedule(tvm.IRModule({"spmm": prim}))
    sch.work_on("spmm")
    (i,) = sch.get_loops(sch.get_sblock("spmm0"))
    sch.parallel(i)
    reparsed = tvm.script.from_source(prim.script())
    tvm.ir.assert_structural_equal(reparsed, prim, map_free_vars=True)


def test_signature_lists_parameters_axes_and_outputs():
    prim = lower_sparse_buffer(lower_sparse_iter(masked_product()))
    signature = json.loads(str(prim.attrs[SIGNATURE_ATTR]))
    assert [p["name"] for p in signature["params"]] == [
        "A", "M", "C", "JA_indptr", "JA_indices", "JM_indptr", "JM_indices", "m", "n", "nnz_a", "nnz_m"]
    assert signature["outputs"] == ["C"]
    sorted_axes = {a["name"] for a in signature["axes"] if a["sorted"]}
    assert sorted_axes == {"JM"}, "the searched axis must have sorted indices"


def test_search_state_lives_in_a_block_local_buffer():
    prim = lower_sparse_buffer(lower_sparse_iter(masked_product()))
    script = prim.script()
    assert "while JM_indices_pos0_state[0] < JM_indices_pos0_state[1]:" in script
    assert 'T.sblock_alloc_buffer((3,), "int32", scope="local")' in script
