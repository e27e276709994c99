"""Error and ranking metrics for latency predictions against measurements (numpy only, no scipy)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from evaluation.rows import EvalRow

WITHIN_THRESHOLDS: tuple[int, ...] = (5, 10, 20, 50)

# An APE that is exactly on a threshold in decimal (a prediction 10% off) can land a few ulps above it in binary;
# it still counts as within.
_THRESHOLD_SLACK = 1e-9


def _as_positive(values: ArrayLike, what: str) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(array) & (array > 0)):
        raise ValueError(f"{what} latencies must be positive and finite")
    return array


def _pair(measured: ArrayLike, predicted: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    m = _as_positive(measured, "measured")
    p = _as_positive(predicted, "predicted")
    if m.shape != p.shape:
        raise ValueError(f"measured has {m.size} values, predicted {p.size}")
    return m, p


def ape(measured: ArrayLike, predicted: ArrayLike) -> NDArray[np.float64]:
    """Absolute percentage error per pair: |pred - meas| / meas * 100."""
    m, p = _pair(measured, predicted)
    # Multiplying before dividing keeps round cases exact (10 vs 11 gives 10.0, not 10.000000000000002).
    return 100.0 * np.abs(p - m) / m


def average_ranks(values: ArrayLike) -> NDArray[np.float64]:
    """1-based ranks; tied values share the mean of the ranks they span (as scipy.stats.rankdata 'average')."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    run_starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    run_ends = np.r_[run_starts[1:], x.size]
    # A run covering 0-based sorted positions start..end-1 holds ranks start+1..end, whose mean is this.
    run_ranks = (run_starts + run_ends + 1) / 2.0
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(run_ranks, run_ends - run_starts)
    return ranks


def pearson(x: ArrayLike, y: ArrayLike) -> float | None:
    """Pearson correlation; None when there are fewer than two pairs or either vector is constant."""
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    b = np.asarray(y, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"x has {a.size} values, y {b.size}")
    if a.size < 2:
        return None
    da = a - a.mean()
    db = b - b.mean()
    denominator = float(np.sqrt(np.dot(da, da) * np.dot(db, db)))
    if denominator == 0.0:
        return None
    return float(np.clip(np.dot(da, db) / denominator, -1.0, 1.0))


def spearman(x: ArrayLike, y: ArrayLike) -> float | None:
    """Spearman correlation: Pearson of average ranks (ties handled); None where pearson gives None."""
    return pearson(average_ranks(x), average_ranks(y))


def _percentile(values: NDArray[np.float64], q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def _mean(values: NDArray[np.float64]) -> float | None:
    return float(values.mean()) if values.size else None


def error_summary(measured: ArrayLike, predicted: ArrayLike) -> dict[str, Any]:
    """Accuracy of predicted against measured latencies, pooled over all pairs.

    Keys: n; mape, median_ape, sd_ape (population SD, ddof=0), p95_ape, p99_ape (numpy's linear interpolation);
    within_5/10/20/50 (percent of pairs with APE <= threshold); spearman_log and pearson_log (on log latency;
    Spearman is rank-based, so the log does not change it); bias (mean signed error (pred - meas) / meas * 100,
    positive when predictions run slow). Statistics that need data are None when there is none; correlations are
    None with fewer than two pairs or a constant vector.
    """
    m, p = _pair(measured, predicted)
    errors = ape(m, p)
    summary: dict[str, Any] = {
        "n": int(m.size),
        "mape": _mean(errors),
        "median_ape": _percentile(errors, 50),
        "sd_ape": float(errors.std(ddof=0)) if errors.size else None,
        "p95_ape": _percentile(errors, 95),
        "p99_ape": _percentile(errors, 99),
    }
    for threshold in WITHIN_THRESHOLDS:
        within = errors <= threshold + _THRESHOLD_SLACK
        summary[f"within_{threshold}"] = float(100.0 * within.mean()) if errors.size else None
    summary["spearman_log"] = spearman(np.log(m), np.log(p))
    summary["pearson_log"] = pearson(np.log(m), np.log(p))
    summary["bias"] = _mean(100.0 * (p - m) / m)
    return summary


def paired(rows: Iterable[EvalRow], estimator: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Measured and predicted ms of the rows where the estimator gave a number, in row order."""
    pairs = [(row.measured_ms, value) for row in rows if (value := row.prediction(estimator)) is not None]
    measured = np.array([m for m, _ in pairs], dtype=np.float64)
    predicted = np.array([p for _, p in pairs], dtype=np.float64)
    return measured, predicted


def ranking_summary(rows: Iterable[EvalRow], estimator: str) -> dict[str, Any]:
    """How well the estimator orders targets for each workload: Spearman across targets, per workload_key.

    Only workloads with at least two targets that have a prediction count. Rows repeating a (workload, target)
    pair are averaged first, so each target is one point. A workload whose measured or predicted values are all
    equal has no ranking to score: it is left out and counted in 'skipped'. With two targets the correlation is
    +1 or -1. Keys: n_workloads, mean, median, p10 (numpy linear interpolation), skipped.
    """
    points: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        value = row.prediction(estimator)
        if value is not None:
            points[row.workload_key][row.target].append((row.measured_ms, value))

    correlations: list[float] = []
    skipped = 0
    for by_target in points.values():
        if len(by_target) < 2:
            continue
        means = np.array([np.mean(pairs, axis=0) for pairs in by_target.values()])
        rho = spearman(means[:, 0], means[:, 1])
        if rho is None:
            skipped += 1
        else:
            correlations.append(rho)

    values = np.array(correlations, dtype=np.float64)
    return {
        "n_workloads": int(values.size),
        "mean": _mean(values),
        "median": _percentile(values, 50),
        "p10": _percentile(values, 10),
        "skipped": skipped,
    }


def natural_key(name: str) -> tuple[int, int, str]:
    """Sort key putting all-digit names in numeric order (96 before 224) ahead of other names in text order."""
    return (0, int(name), name) if name.isdigit() else (1, 0, name)


def grouped(rows: Sequence[EvalRow], estimator: str, key: Callable[[EvalRow], str]) -> dict[str, dict[str, Any]]:
    """error_summary of the estimator per group, for every group that has rows, sorted by group name.

    Groups come from all rows, so a group where the estimator gave no number is present with n = 0; that keeps
    tables of several estimators aligned. Names made only of digits (resolutions) sort numerically.
    """
    members: dict[str, list[EvalRow]] = defaultdict(list)
    for row in rows:
        members[key(row)].append(row)
    return {name: error_summary(*paired(members[name], estimator)) for name in sorted(members, key=natural_key)}
