"""Empty torch tensors reach a kernel with the strides TVM expects: ``torch.from_numpy`` of an empty numpy
array has stride 0, which torch still calls contiguous and TVM's compact-array check refused (a zero-row
structure's row scale made that way failed inside the call)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sparsetir.ops.torch_aggregate  # noqa: F401 - registers torch.ops.sparsetir.spmm_row_scaled
from sparsetir.runtime.marshal import kernel_argument


@pytest.mark.parametrize("make", [lambda: torch.from_numpy(np.empty(0, np.float32)),
                                  lambda: torch.from_numpy(np.zeros((0, 8), np.float32)),
                                  lambda: torch.empty(0)])
def test_an_empty_tensor_is_passed_with_compact_strides(make):
    empty = make()
    argument, staging = kernel_argument(empty, output=True)
    assert staging is None and tuple(argument.shape) == tuple(empty.shape) and argument.dtype == empty.dtype
    assert argument.stride() == torch.empty(empty.shape).stride()


def test_a_zero_row_structure_with_a_numpy_made_scale():
    indptr, indices = torch.zeros(1, dtype=torch.int32), torch.zeros(0, dtype=torch.int32)
    B = torch.randn(5, 8)
    for scale in (torch.from_numpy(np.empty(0, np.float32)), torch.empty(0)):
        C = torch.ops.sparsetir.spmm_row_scaled(indptr, indices, B, scale, 5)
        assert tuple(C.shape) == (0, 8)
