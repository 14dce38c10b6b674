"""A cost model that ranks candidates before they are measured.

A tuning run measures few candidates (compiling one takes seconds), so it measures first the
ones a model predicts fastest. The model learns from what was measured before, on any matrix:
every record of the tuning database keeps its ``measurements`` (configs and medians), and the
current run adds its own as they come (:meth:`CostModel.observe`).

    model = CostModel.from_database(database, key)   # key: the case's tuning key
    model.update()                                   # trains when there is enough to learn from
    model.rank(configs)                              # best predicted first (unchanged when untrained)

Features are ``name -> float`` dicts built from what every op, input kind, format and knob
already declares, so nothing here lists them:

- the case, from its tuning key: the fingerprint's shape, nnz, relation count and degree
  histogram (log sizes, mean degree, moments of the log2 degree over the rows and over the
  non-zeros, the share of empty rows), log2 of each feature size, the dtype (one-hot);
- the configuration: the format's name and text (one-hot) and fields (an int: log2 and one-hot;
  ints: count, log2 of the smallest and the largest), and each knob (a bool 0/1, a number
  log2(1 + v) and one-hot, None or a string one-hot): the one-hots let a linear model prefer a
  value in the middle of a knob's range.

The target is a candidate's log median relative to its case: log(median) minus the median of
the log medians measured in the same record (or run). That removes the matrix's size and the
machine's load on the day, and leaves what the model ranks: how much faster or slower a
configuration is than its peers on a case like this one. A record with one usable
measurement teaches nothing relative and is left out.

The model is a ridge regression solved with numpy (no scikit-learn): one weight per
configuration feature, and one per product of a configuration feature with a case feature, so
that what is fast can depend on the matrix (the products shrink harder, ``INTERACTION_SCALE``).
Features are standardised over the training rows; an absent numeric feature (a format field
another format does not have) takes the mean, an absent one-hot is 0. The case's own features
need no weight of their own: the targets are relative within a case, so they would only add a
constant to every candidate. With fewer than ``MIN_ROWS`` usable measurements there is no model
and :meth:`CostModel.rank` returns its input unchanged. Training and ranking take milliseconds,
so the model is refitted whenever the run has measured more. A record whose content is damaged
(a key without a usable fingerprint, measurements that are not a list of ``{config, median_s}``,
a median that is not a positive finite number, a config naming no format or a format this
version cannot parse) is skipped and counted, never raised.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import numpy as np

from ..formats import parse_format
from .database import TuningDatabase, config_problem
from .space import config_key

MIN_ROWS = 16  # usable measurements (database and current run together) before a model is trained
MAX_HISTORY_ROWS = 4000  # the most recent database measurements kept for training
CURRENT_WEIGHT = 3.0  # a measurement of the case being tuned counts this many times
RIDGE_ALPHA = 1.0  # the ridge penalty on standardised features
INTERACTION_SCALE = 0.3  # config x case products enter scaled by this: a penalty 1 / scale**2 times the main effects'


class CostModel:
    """Predicts, for one tuning case, which candidate configurations are fastest.

    Parameters
    ----------
    key : dict
        The tuning key of the case being tuned (``database.tuning_key``): op, fingerprint,
        feat, dtype, target.
    records : iterable of dict
        Tuning database records to learn from; those of another op or target are ignored, and
        damaged ones are skipped (``skipped`` counts them).
    """

    def __init__(self, key: dict, records: Iterable[dict] = ()):
        self.op, self.target = key["op"], key["target"]
        self.case = case_features(key["fingerprint"], key["feat"], key["dtype"])
        # (case features, config features, relative log median), database records
        self.history: list[tuple[dict, dict, float]] = []
        self.records = self.skipped = 0
        for record in records:
            try:
                rows = record_rows(record, self.op, self.target)
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
                self.skipped += 1
                continue
            if rows is not None:
                self.records += 1
                self.history.extend(rows)
        self.history = self.history[-MAX_HISTORY_ROWS:]
        self.current: list[tuple[dict, float]] = []  # (config, median seconds), this run
        self.fits = 0
        self._fitted_current = -1
        self._ridge: _Ridge | None = None
        self._config_features: dict[str, dict] = {}

    @classmethod
    def from_database(cls, database: TuningDatabase, key: dict) -> CostModel:
        """A model over ``database``'s records (a database that cannot be read gives none, with a warning)."""
        try:
            records = database.records()
        except OSError as error:
            warnings.warn(f"cost model: the tuning database {database.path} cannot be read ({error}); "
                          "ranking without it", stacklevel=2)
            records = []
        model = cls(key, records)
        if model.skipped:
            warnings.warn(f"cost model: skipped {model.skipped} damaged record(s) of {database.path}", stacklevel=2)
        return model

    @property
    def trained(self) -> bool:
        return self._ridge is not None

    def observe(self, config: dict, median_s: float | None) -> None:
        """Add a measurement of the case being tuned (None: it failed, and teaches nothing)."""
        if _positive_finite(median_s):
            self.current.append((config, float(median_s)))

    def rows(self) -> tuple[list[tuple[dict, dict]], np.ndarray, np.ndarray]:
        """The training set: (case, config) features, relative log medians and weights (history, then this run)."""
        features = [(case, config) for case, config, _ in self.history]
        targets = [t for _, _, t in self.history]
        weights = [1.0] * len(self.history)
        if len(self.current) >= 2:
            logs = np.log([median for _, median in self.current])
            center = float(np.median(logs))
            for (config, _), value in zip(self.current, logs):
                features.append((self.case, self.config_features(config)))
                targets.append(float(value) - center)
                weights.append(CURRENT_WEIGHT)
        return features, np.asarray(targets, dtype=np.float64), np.asarray(weights, dtype=np.float64)

    def update(self) -> bool:
        """Train when it is due: once there are ``MIN_ROWS`` usable measurements, and again whenever this
        run has measured more since the last fit; returns ``trained``.

        A failure to train warns and leaves the model as it was.
        """
        current = len(self.current)
        usable = len(self.history) + (current if current >= 2 else 0)
        if current != self._fitted_current and usable >= MIN_ROWS:
            self._fitted_current = current
            try:
                self._ridge = _Ridge.fit(*self.rows())
                self.fits += 1
            except Exception as error:  # a model that cannot train must not stop the tuner
                warnings.warn(f"cost model: training failed ({type(error).__name__}: {error}); "
                              "ranking without it", stacklevel=2)
        return self.trained

    def config_features(self, config: dict) -> dict:
        """The features of ``config`` (cached by its key)."""
        key = config_key(config)
        if key not in self._config_features:
            self._config_features[key] = config_features(config)
        return self._config_features[key]

    def predict(self, configs: list[dict]) -> np.ndarray:
        """Predicted log median of each config relative to its peers (lower is faster); needs ``trained``."""
        if not self.trained:
            raise RuntimeError("the cost model is not trained (see CostModel.update)")
        return self._ridge.predict([(self.case, self.config_features(config)) for config in configs])

    def rank(self, configs: list[dict]) -> list[dict]:
        """``configs``, the best predicted first (stable); unchanged when untrained or on a prediction failure."""
        if not self.trained or not configs:
            return list(configs)
        try:
            predicted = self.predict(configs)
        except Exception as error:  # e.g. a config whose format cannot be parsed any more
            warnings.warn(f"cost model: prediction failed ({type(error).__name__}: {error}); "
                          "ranking without it", stacklevel=2)
            return list(configs)
        return [configs[i] for i in np.argsort(predicted, kind="stable")]

    def summary(self) -> dict:
        """What the model learnt from: records, measurements (database, this run), skipped records, fits."""
        return {"records": self.records, "history_rows": len(self.history), "current_rows": len(self.current),
                "skipped_records": self.skipped, "fits": self.fits, "trained": self.trained}


class _Ridge:
    """Weighted ridge regression on config features and their products with the (numeric) case features."""

    def __init__(self, config_names, case_names, config_center, config_scale, case_center, case_scale, coef,
                 intercept):
        self.config_names, self.case_names = config_names, case_names
        self.config_center, self.config_scale = config_center, config_scale
        self.case_center, self.case_scale = case_center, case_scale
        self.coef, self.intercept = coef, intercept

    @classmethod
    def fit(cls, rows: list[tuple[dict, dict]], targets: np.ndarray, weights: np.ndarray) -> _Ridge:
        config_names = sorted({name for _, config in rows for name in config})
        case_names = sorted({name for case, _ in rows for name in case if "=" not in name})
        configs = _matrix([config for _, config in rows], config_names)
        cases = _matrix([case for case, _ in rows], case_names)
        config_center, config_scale = _standard(configs)
        case_center, case_scale = _standard(cases)
        model = cls(config_names, case_names, config_center, config_scale, case_center, case_scale, None, 0.0)
        design = model._design(configs, cases)
        total = weights.sum()
        mean_x, mean_y = weights @ design / total, float(weights @ targets / total)
        centered = design - mean_x
        weighted = centered * weights[:, None]
        gram = centered.T @ weighted + RIDGE_ALPHA * np.eye(design.shape[1])
        model.coef = np.linalg.solve(gram, weighted.T @ (targets - mean_y))
        model.intercept = mean_y - float(mean_x @ model.coef)
        return model

    def _design(self, configs: np.ndarray, cases: np.ndarray) -> np.ndarray:
        configs = np.nan_to_num((configs - self.config_center) / self.config_scale)  # absent: the mean
        cases = np.nan_to_num((cases - self.case_center) / self.case_scale)
        products = (configs[:, :, None] * cases[:, None, :]).reshape(len(configs), -1)
        return np.hstack([configs, INTERACTION_SCALE * products])

    def predict(self, rows: list[tuple[dict, dict]]) -> np.ndarray:
        configs = _matrix([config for _, config in rows], self.config_names)
        cases = _matrix([case for case, _ in rows], self.case_names)
        return self._design(configs, cases) @ self.coef + self.intercept


def _standard(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and scales (1 where a column is constant or absent), ignoring NaNs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column
        center = np.nan_to_num(np.nanmean(matrix, axis=0)) if len(matrix) else np.zeros(matrix.shape[1])
        scale = np.nan_to_num(np.nanstd(matrix, axis=0)) if len(matrix) else np.ones(matrix.shape[1])
    scale[scale < 1e-12] = 1.0
    return center, scale


def _matrix(rows: list[dict], names: list[str]) -> np.ndarray:
    """Rows of features as a matrix over ``names``: an absent one-hot (``name=value``) is 0, any other NaN."""
    absent = np.array([0.0 if "=" in name else np.nan for name in names])
    matrix = np.tile(absent, (len(rows), 1))
    column = {name: index for index, name in enumerate(names)}
    for r, row in enumerate(rows):
        for name, value in row.items():
            c = column.get(name)
            if c is not None:
                matrix[r, c] = value
    return matrix


def _positive_finite(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value > 0)


def _log2p(value: float) -> float:
    return math.copysign(math.log2(1.0 + abs(value)), value)


def case_features(fingerprint: dict, feat, dtype: str) -> dict:
    """The features of a tuning case: its fingerprint (any input kind's: shape, nnz, degree histogram,
    relations where there are some), feature size(s) and dtype; ``ValueError`` for a damaged one."""
    if not isinstance(fingerprint, dict):
        raise ValueError(f"the fingerprint is not an object: {fingerprint!r}"[:200])
    shape, nnz, histogram = fingerprint["shape"], fingerprint["nnz"], fingerprint["degree_histogram"]
    if not (isinstance(shape, list) and len(shape) >= 2 and all(_count(s) for s in shape)):
        raise ValueError(f"the fingerprint's shape is not a list of sizes: {shape!r}"[:200])
    if not _count(nnz) or not (isinstance(histogram, list) and all(_count(c) for c in histogram)):
        raise ValueError("the fingerprint's nnz or degree histogram is not counts")
    feats = feat if isinstance(feat, list) else [feat]
    if not feats or not all(_count(f) and f > 0 for f in feats):
        raise ValueError(f"the feature size is not positive ints: {feat!r}"[:200])
    if not isinstance(dtype, str):
        raise ValueError(f"the dtype is not a string: {dtype!r}"[:200])
    counts = np.asarray(histogram, dtype=np.float64)
    rows = float(counts.sum())
    features = {"log_rows": _log2p(shape[0]), "log_cols": _log2p(shape[1]), "log_nnz": _log2p(nnz),
                "mean_degree": _log2p(nnz / rows) if rows else 0.0, f"dtype={dtype}": 1.0}
    if rows:
        features["empty_rows"] = float(counts[0] / rows)
        occupied = counts[1:]
        if occupied.sum():
            log_degree = np.arange(occupied.size) + 0.5  # bin b >= 1 holds degrees [2^(b-1), 2^b)
            share = occupied / occupied.sum()
            mean = float(share @ log_degree)
            std = float(np.sqrt(share @ (log_degree - mean) ** 2))
            features.update(log_degree_mean=mean, log_degree_std=std, log_degree_max=float(occupied.size),
                            log_degree_skew=float(share @ (log_degree - mean) ** 3) / std ** 3 if std else 0.0)
            by_nnz = occupied * np.exp2(log_degree)
            features["nnz_log_degree_mean"] = float(by_nnz @ log_degree / by_nnz.sum())
    if "relations" in fingerprint:
        if not _count(fingerprint["relations"]):
            raise ValueError("the fingerprint's relation count is not a count")
        features["log_relations"] = _log2p(fingerprint["relations"])
    for index, size in enumerate(feats):
        features[f"log_feat{index}"] = math.log2(size)
    features["log_feat"] = sum(math.log2(size) for size in feats)
    return features


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def config_features(config: dict) -> dict:
    """The features of a configuration: format name and fields, knob values; ``ValueError`` for a damaged one."""
    problem = config_problem(config)
    if problem is not None:
        raise ValueError(problem)
    features = dict(_format_features(config["format"]))
    for name, value in config.items():
        if name == "format":
            continue
        features.update(_value_features(f"knob.{name}", value))
    return features


_FORMAT_FEATURES: dict[str, dict] = {}


def _format_features(text: str) -> dict:
    if text not in _FORMAT_FEATURES:
        fmt = parse_format(text)  # ValueError for a format this version does not know
        features = {f"format={fmt.name}": 1.0, f"format.text={text}": 1.0}
        for name, value in zip(fmt.param_names, fmt.params()):
            features.update(_value_features(f"format.{fmt.name}.{name}", value))
        _FORMAT_FEATURES[text] = features
    return _FORMAT_FEATURES[text]


def _value_features(name: str, value) -> dict:
    if value is None or isinstance(value, str):
        return {f"{name}={value}": 1.0}
    if isinstance(value, bool):
        return {name: float(value)}
    if isinstance(value, (int, float)) and math.isfinite(value):  # the value's size, and the value itself
        return {name: _log2p(value), f"{name}={value:g}": 1.0}
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                          for v in value):
        return {f"{name}.count": float(len(value)), f"{name}.min": _log2p(min(value)),
                f"{name}.max": _log2p(max(value))}
    raise ValueError(f"{name}: a value the cost model cannot describe: {value!r}"[:200])


def record_rows(record: dict, op: str, target: dict) -> list[tuple[dict, dict, float]] | None:
    """A database record's training rows ``(case features, config features, relative log median)``; None when it is of another op
    or target, or holds fewer than two usable measurements. Damage raises (``ValueError``,
    ``KeyError``, ``TypeError``), and the caller skips the record."""
    key = record["key"]
    if not isinstance(key, dict):
        raise ValueError("the record's key is not an object")
    if key.get("op") != op or key.get("target") != target:
        return None
    case = case_features(key["fingerprint"], key["feat"], key["dtype"])
    measurements = record.get("measurements", [])
    if not isinstance(measurements, list):
        raise ValueError("the record's measurements are not a list")
    rows = []
    for measurement in measurements:
        if not isinstance(measurement, dict):
            raise ValueError("a measurement is not an object")
        median = measurement.get("median_s")
        if median is None:  # a candidate that failed: not damage, but nothing to learn
            continue
        if not _positive_finite(median):
            raise ValueError(f"a median is not a positive number of seconds: {median!r}"[:200])
        rows.append((config_features(measurement["config"]), math.log(median)))
    if len(rows) < 2:
        return None
    center = float(np.median([value for _, value in rows]))
    return [(case, features, value - center) for features, value in rows]
