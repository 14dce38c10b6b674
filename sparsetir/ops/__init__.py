"""User-level ops, each a few lines composing IR, formats, transforms, schedules and the backend.

Every module in this folder is imported here; an op module registers an
:class:`~sparsetir.ops.registry.OpSpec` (``register_op``), and this package re-exports the
names in that module's ``__all__``. So a new op needs no edit here. A module whose op is a
torch custom op only (no OpSpec: no formats to tune, as ``edge_softmax.py``) names the calls it
exports in ``TORCH_EXPORTS``.
"""

from __future__ import annotations

import importlib
import pkgutil

from .registry import OpSpec, get_op, op_names, register_op

_EXPORTS = []
for _module in pkgutil.iter_modules(__path__):
    for _name in getattr(importlib.import_module(f"{__name__}.{_module.name}"), "TORCH_EXPORTS", ()):
        globals()[_name] = getattr(importlib.import_module(f"{__name__}.{_module.name}"), _name)
        _EXPORTS.append(_name)
for _op in op_names():
    _op_module = importlib.import_module(get_op(_op).call.__module__)
    for _name in _op_module.__all__:
        globals()[_name] = getattr(_op_module, _name)
        _EXPORTS.append(_name)

__all__ = ["OpSpec", "get_op", "op_names", "register_op", *_EXPORTS]
