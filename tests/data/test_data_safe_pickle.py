"""The restricted unpickler refuses every global that is not allow-listed, before it runs."""

from __future__ import annotations

import builtins
import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npy_format

from sparsetir.data import (
    RefusedGlobalError,
    RestrictedUnpickler,
    read_graphdata_npz,
    read_planetoid_graph,
    restricted_loads,
)
from sparsetir.data.planetoid import PLANETOID_GLOBALS


class _RunsShell:
    """Unpickling this calls ``os.system`` (the classic pickle exploit)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _RunsEval:
    """Unpickling this calls ``builtins.eval`` on code that writes a file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (builtins.eval, (f"open({self.marker!r}, 'w').write('pwned')",))


@pytest.mark.parametrize("payload_type", [_RunsShell, _RunsEval])
@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_hostile_pickle_is_refused_before_it_runs(tmp_path, payload_type, protocol):
    marker = tmp_path / "side_effect"
    data = pickle.dumps(payload_type(marker), protocol=protocol)
    refused = r"refused to unpickle global (posix|os|builtins|__builtin__)\.(system|eval)"
    with pytest.raises(RefusedGlobalError, match=refused):
        restricted_loads(data, PLANETOID_GLOBALS)
    assert not marker.exists()


def test_refusal_is_an_unpickling_error_naming_the_allow_list():
    data = pickle.dumps(_RunsShell("/nonexistent/never"), protocol=2)
    with pytest.raises(pickle.UnpicklingError) as info:
        restricted_loads(data, {("builtins", "list"): list})
    assert "builtins.list" in str(info.value)


def test_allow_listed_globals_resolve_to_the_given_objects():
    graph = collections.defaultdict(list, {0: [1, 2], 3: [0]})
    loaded = restricted_loads(pickle.dumps(graph, protocol=2), PLANETOID_GLOBALS)
    assert isinstance(loaded, collections.defaultdict) and loaded == graph


def test_nothing_allowed_refuses_even_list():
    with pytest.raises(RefusedGlobalError, match="collections.defaultdict"):
        restricted_loads(pickle.dumps(collections.defaultdict(list), protocol=2), ())


def test_pairs_without_objects_only_name_builtins():
    assert restricted_loads(pickle.dumps(list, protocol=4), [("builtins", "list")]) is list
    with pytest.raises(TypeError, match="needs the object it resolves to"):
        RestrictedUnpickler(io.BytesIO(b""), [("os", "system")])


def test_hostile_planetoid_file_is_refused(tmp_path):
    marker = tmp_path / "side_effect"
    graph_file = tmp_path / "ind.evil.graph"
    graph_file.write_bytes(pickle.dumps(_RunsShell(marker), protocol=2))
    with pytest.raises(RefusedGlobalError, match="ind.evil.graph"):
        read_planetoid_graph(graph_file)
    assert not marker.exists()


def _npz_with_object_member(path, member, pickled: bytes):
    """An .npz whose ``member`` is an object-array .npy header followed by ``pickled``."""
    header = io.BytesIO()
    npy_format.write_array_header_1_0(header, {"descr": "|O", "fortran_order": False, "shape": ()})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member + ".npy", header.getvalue() + pickled)  # the header includes the magic
        buffer = io.BytesIO()
        np.save(buffer, np.arange(3))
        archive.writestr("node_label.npy", buffer.getvalue())


@pytest.mark.parametrize("payload_type", [_RunsShell, _RunsEval])
def test_hostile_graphdata_npz_is_refused(tmp_path, payload_type):
    marker = tmp_path / "side_effect"
    npz = tmp_path / "evil.npz"
    _npz_with_object_member(npz, "adj_matrix", pickle.dumps(payload_type(marker), protocol=2))
    with pytest.raises(RefusedGlobalError, match=r"evil\.npz\[adj_matrix\.npy\].*refused to unpickle"):
        read_graphdata_npz(npz)
    assert not marker.exists()


def test_graphdata_pickle_of_the_wrong_type_is_a_type_error(tmp_path):
    npz = tmp_path / "wrong.npz"
    # A 0-d object array holding None: every global it names is allowed, but it is no CSR matrix.
    _npz_with_object_member(npz, "adj_matrix", pickle.dumps(np.array(None, dtype=object), protocol=3))
    with pytest.raises(TypeError, match="expected a scipy CSR matrix"):
        read_graphdata_npz(npz)
