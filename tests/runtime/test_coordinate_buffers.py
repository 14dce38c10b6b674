"""An integer buffer used as a coordinate (``Out[OutIdx[k, p], o]``) is checked on every call against
the axis it indexes, which the lowering infers; an out-of-range entry raises a ValueError naming the
buffer and its first bad position instead of being dropped by the kernel's guard."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from ir_programs import scatter_arrays, scatter_conv

from sparsetir.backend import build

HELPERS = Path(__file__).resolve().parents[1] / "helpers"


def test_the_signature_says_which_axis_each_index_buffer_indexes():
    params = {p["name"]: p for p in build(scatter_conv(4, 4)).signature.params}
    assert params["OutIdx"]["coordinates_of"] == [{"axis": "Nout", "length": "nout"}]
    assert params["InIdx"]["coordinates_of"] == [{"axis": "Nin", "length": "nin"}]
    assert "coordinates_of" not in params["F"]


@pytest.mark.parametrize(("buffer", "value"), [("OutIdx", 13), ("OutIdx", -1), ("InIdx", 17)])
def test_an_out_of_range_coordinate_names_the_buffer_and_position(buffer, value):
    args, sizes, _ = scatter_arrays(np.random.default_rng(0), 5, 30, 17, 13, 4, 4)
    args[buffer][2, 7] = value
    with pytest.raises(ValueError, match=rf"{buffer}\[67\] = {value} is out of range: {buffer} indexes axis"):
        build(scatter_conv(4, 4))(**args, **sizes)
    assert np.isnan(args["Out"]).all()  # refused before the kernel ran


@pytest.mark.slow
def test_an_out_of_range_coordinate_is_a_value_error_in_a_fresh_process_too():
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(HELPERS)!r})
        import numpy as np
        from ir_programs import scatter_arrays, scatter_conv
        from sparsetir.backend import build
        args, sizes, _ = scatter_arrays(np.random.default_rng(0), 5, 30, 17, 13, 4, 4)
        args["OutIdx"][4, 0] = 10**8
        try:
            build(scatter_conv(4, 4))(**args, **sizes)
        except ValueError as error:
            print(json.dumps({{"error": str(error)}}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "OutIdx[120] = 100000000 is out of range" in json.loads(result.stdout.strip().splitlines()[-1])["error"]
