"""Import DGL 2.1 under torch 2.13, where two of its imports fail, and say why when it still can't.

PyPI's last DGL for Python 3.11 is 2.1.0 (CPU only), built for torch <= 2.2. Importing it
under torch 2.13 fails in two places that SpMM/SDDMM never use:

1. ``dgl.graphbolt`` (imported by ``dgl.distributed``) needs ``torchdata.datapipes``, which
   torchdata >= 0.10 removed, and a graphbolt library built for this torch. The shim installs
   a stand-in ``dgl.graphbolt`` module before ``import dgl``. It defines the one class DGL's
   own code checks with ``isinstance`` (``FusedCSCSamplingGraph``, never instantiated); any
   other attribute raises ``AttributeError`` naming this shim.
2. ``dgl.utils`` falls back to ``setuptools.extern.packaging`` when ``packaging`` is missing;
   newer setuptools dropped ``setuptools.extern``. The shim aliases it to ``packaging`` when
   that is importable.

:func:`import_dgl` returns ``(dgl, None)`` or ``(None, "<why>")``; it never raises.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types

__all__ = ["import_dgl"]


class _MissingGraphbolt(types.ModuleType):
    """Stand-in for ``dgl.graphbolt``: the isinstance target, and a clear error for anything else."""

    class FusedCSCSamplingGraph:  # DGL only tests isinstance against it
        pass

    def __getattr__(self, name: str):
        raise AttributeError(
            f"dgl.graphbolt.{name} is unavailable: graphbolt does not load under this torch, and "
            "baselines.dgl_import replaced it with a stand-in (SpMM/SDDMM do not need it)"
        )


def _shim_setuptools_extern() -> None:
    try:
        importlib.import_module("setuptools.extern.packaging")
        return
    except ImportError:
        pass
    try:
        packaging = importlib.import_module("packaging")
        importlib.import_module("packaging.version")
    except ImportError:
        return  # DGL will then fail with its own message, which import_dgl reports
    extern = types.ModuleType("setuptools.extern")
    extern.packaging = packaging
    sys.modules.setdefault("setuptools.extern", extern)
    sys.modules.setdefault("setuptools.extern.packaging", packaging)


@functools.cache
def import_dgl():
    """``(dgl, None)`` when DGL imports (shimmed as needed), else ``(None, reason)``."""
    if importlib.util.find_spec("dgl") is None:
        return None, "dgl is not installed (pip install '.[dgl]': dgl 2.1.0, CPU only)"
    sys.modules.setdefault("dgl.graphbolt", _MissingGraphbolt("dgl.graphbolt"))
    _shim_setuptools_extern()
    try:
        dgl = importlib.import_module("dgl")
        importlib.import_module("dgl.ops")
    except Exception as error:  # DGL's import can fail in many ways under a newer torch
        return None, f"dgl does not import under this torch even with the shim: {type(error).__name__}: {error}"
    return dgl, None
