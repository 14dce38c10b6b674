"""Autotuning over formats x knobs, with a tuning database (see ``tuner.py``).

Importing this package registers :func:`auto_config` as the answer to ``format="auto"``
(``sparsetir.hooks``), which the ops ask for and never import.
"""

from .. import hooks
from .database import TuningDatabase, database_path, tuning_key
from .fingerprint import fingerprint
from .space import SearchSpace, search_space
from .tuner import TuneResult, auto_config, tune, tune_sddmm, tune_spmm

hooks.register_format_resolver(auto_config)

__all__ = ["SearchSpace", "TuneResult", "TuningDatabase", "auto_config", "database_path", "fingerprint",
           "search_space", "tune", "tune_sddmm", "tune_spmm", "tuning_key"]
