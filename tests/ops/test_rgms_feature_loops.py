"""rgms's ``feature_loops`` knob: with the output features innermost (``lk``) every dataflow and
relational format computes what the default order (``kl``) computes, and the default is unchanged."""

import numpy as np
import pytest
import scipy.sparse as sp

from sparsetir.formats.relational import read_relational_input
from sparsetir.ops import compile_rgms, rgms
from sparsetir.reference.rgms import rgms_reference


def relations(seed=3):
    matrices = [sp.random(30, 24, density=0.1, format="csr", dtype=np.float32, random_state=seed + r)
                for r in range(4)]
    matrices[2] = sp.csr_matrix((30, 24), dtype=np.float32)  # a relation with no edges
    return matrices


@pytest.mark.parametrize("fmt,dataflow", [("csf", "edge"), ("relcsr", "aggregate"), ("ell3d", "transform")])
def test_outputs_innermost_equals_the_reference(fmt, dataflow):
    matrices = relations()
    matrix = read_relational_input(matrices)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((24, 8)).astype(np.float32)
    W = (rng.standard_normal((4, 8, 16)) / np.sqrt(8)).astype(np.float32)
    Y = rgms(matrices, X, W, format=fmt, dataflow=dataflow, feature_loops="lk")
    case = rgms_reference(matrix, X, W)
    assert (np.abs(Y - case.reference) <= case.tolerance).all()


def test_the_default_order_is_unchanged_and_named_only_when_set():
    matrices = relations(7)
    default = compile_rgms(matrices, 4, 4, dataflow="edge")
    named = compile_rgms(matrices, 4, 4, dataflow="edge", feature_loops="kl")
    assert "feature_loops" not in default.spec and "feature_loops" not in named.spec
    assert compile_rgms(matrices, 4, 4, dataflow="edge", feature_loops="lk").spec["feature_loops"] == "lk"
    with pytest.raises(ValueError, match="feature_loops must be one of"):
        compile_rgms(matrices, 4, 4, feature_loops="kk")
