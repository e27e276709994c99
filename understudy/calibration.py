"""Calibration: a user's few real measurements of one target turn any estimator into a fitted one for that target.

The model is one multiplicative correction per target, fitted in log space: the median of log(measured /
predicted) over the points, shrunk toward no correction as if PRIOR_POINTS more points had shown none. On the
H200 evaluation the base estimator's errors on a target are mostly per-workload, not a shared bias, so a plain
mean of a few points added noise (benchmarks/accuracy/README.md); the shrunk median stays within about a point
of the base there and corrects a target whose bias is real.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from understudy.workload import Workload, sha256_of


class CalibrationPoint(BaseModel):
    """One real measurement on the target: a workload and its measured step time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: Workload
    measured_ms: float = Field(gt=0, le=3_600_000)


class CalibrationSet(BaseModel):
    """The points a user gave for one target."""

    model_config = ConfigDict(extra="forbid")

    points: list[CalibrationPoint] = Field(min_length=1, max_length=1000)
    # The estimator whose predictions the correction is fitted to; None: the engine's default (hostaware with a
    # GPU, analytic without). Not in the digest: the calibrated estimator's version names the base separately.
    base_estimator: str | None = Field(default=None, min_length=1, max_length=40)

    def digest(self) -> str:
        return sha256_of([[p.workload.digest(), p.measured_ms] for p in self.points])


PRIOR_POINTS = 3


def fit_scale(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """The multiplicative correction for a target, from its calibration points' predictions and measurements."""
    logs = [math.log(m / p) for p, m in zip(predicted, measured, strict=True) if p > 0 and m > 0]
    if not logs:
        raise ValueError("calibration needs at least one point with a positive prediction and measurement")
    return math.exp(statistics.median(logs) * len(logs) / (len(logs) + PRIOR_POINTS))
