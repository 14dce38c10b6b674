"""Autotuning over formats x schedule knobs, with a tuning database (see ``tuner.py``)."""

from .database import TuningDatabase, database_path, tuning_key
from .fingerprint import fingerprint
from .space import SearchSpace, search_space
from .tuner import TuneResult, auto_config, tune, tune_sddmm, tune_spmm

__all__ = ["SearchSpace", "TuneResult", "TuningDatabase", "auto_config", "database_path", "fingerprint",
           "search_space", "tune", "tune_sddmm", "tune_spmm", "tuning_key"]
