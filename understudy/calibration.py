"""Calibration: a user's few real measurements of one target turn any estimator into a fitted one for that target.

A base estimator is off on a target for reasons that are few and physical: its tensor cores, its plain FP32 lanes or
its memory system deliver more or less than the zero-shot constants assume, and training may run differently from
inference. So the correction fits one log-scale per kernel class (tensor, simt, other) and one per mode:

    corrected = predicted x (sum over classes of share_c x e^theta_c) x e^phi_mode

where share_c is the base prediction's share of time in class c (estimators that price classes report it in their
details as `class_shares`; for one that does not, only the mode scale is fitted). The fit minimises the squared
log error over the points plus a ridge that pulls every log-scale toward 0, the zero-shot value, as if
PRIOR_POINTS more points had agreed with the base: with one point it barely moves, with many it follows the data,
and a workload whose time is spread over classes informs each of them in proportion.

What a point says beyond the correction belongs to its workload. A point of the target itself answers its own
workload: predicted again, that workload gets its measurement back (the mean of the logs, if measured more than once).
A point may also have been measured on another target (`measured_on`): a federated population's other devices, or a
card the user measured before. Such a point says nothing of this target's scales, but what it says beyond its own
target's correction belongs to the workload (a model the estimators price too fast on one GPU they mostly price too
fast on the next: on the RTX 3090 and RTX 4090 files those residuals correlate at 0.62-0.77). So each other target's
points are fitted a correction of their own, and a prediction of a workload they measured is multiplied by
e^(TRANSFER_WEIGHT x the mean of its residuals there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from understudy.catalog import CatalogTarget
from understudy.workload import Workload, sha256_of


class CalibrationPoint(BaseModel):
    """One real measurement: a workload and its measured step time, on the calibrated target or, with measured_on
    (a catalog id), on another one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: Workload
    measured_ms: float = Field(gt=0, le=3_600_000)
    measured_on: CatalogTarget | None = None


class CalibrationSet(BaseModel):
    """The points a user gave for one target."""

    model_config = ConfigDict(extra="forbid")

    points: list[CalibrationPoint] = Field(min_length=1, max_length=1000)
    # The estimator whose predictions the correction is fitted to; None: the engine's default (hostaware with a
    # GPU, analytic without). Not in the digest: the calibrated estimator's version names the base separately.
    base_estimator: str | None = Field(default=None, min_length=1, max_length=40)

    def digest(self) -> str:
        # A point of the target itself hashes as it always has, so older calibrations keep their digests.
        return sha256_of([[p.workload.digest(), p.measured_ms, *([p.measured_on] if p.measured_on else [])]
                          for p in self.points])


CLASSES = ("tensor", "simt", "other")
# Ridge weight, in points, on each log-scale: chosen among 2, 5 and 10 on the RTX 3090 files at k = 5 and reported on
# the RTX 4090's (benchmarks/accuracy/calibration.py). The zero-shot errors there are per workload, not per target, so
# the strongest pull toward the zero-shot prediction did least harm.
PRIOR_POINTS = 10.0
# The share of a workload's residual on other targets that its prediction here takes: chosen among 0, 0.3, 0.5, 0.7
# and 1 at k = 5 on the NCHW pair of timm files (each card's file measured on the other; hostaware and analytic) and
# reported on the NHWC pair (benchmarks/accuracy/calibration.py). Less than 1, as a regression toward zero should be:
# the residuals correlate at 0.62-0.77 and spread about as much on one card as on the other.
TRANSFER_WEIGHT = 0.7


class FitPoint(BaseModel):
    """One calibration point as the fit sees it: the base's prediction (and its class shares) and the measurement."""

    model_config = ConfigDict(frozen=True)

    predicted_ms: float = Field(gt=0)
    measured_ms: float = Field(gt=0)
    mode: str
    shares: dict[str, float] | None = None


class Correction(BaseModel):
    """The fitted log-scales; factor() turns a base prediction's shares and mode into its multiplier."""

    model_config = ConfigDict(frozen=True)

    class_log_scales: dict[str, float]
    mode_log_scales: dict[str, float]
    points: int

    def factor(self, shares: dict[str, float] | None, mode: str) -> float:
        mixed = 1.0
        if shares:
            total = sum(shares.get(c, 0.0) for c in CLASSES)
            if total > 0:
                mixed = sum(shares.get(c, 0.0) / total * math.exp(self.class_log_scales.get(c, 0.0)) for c in CLASSES)
        return mixed * math.exp(self.mode_log_scales.get(mode, 0.0))


def fit_correction(points: Sequence[FitPoint], prior_points: float = PRIOR_POINTS) -> Correction:
    """The ridge-regularised least-squares fit of the log-scales (Gauss-Newton steps; the ridge rows keep each step's
    system of full rank)."""
    usable = [p for p in points if p.predicted_ms > 0 and p.measured_ms > 0 and math.isfinite(p.predicted_ms)
              and math.isfinite(p.measured_ms)]
    if not usable:
        raise ValueError("calibration needs at least one point with a positive prediction and measurement")
    residual = [math.log(p.measured_ms / p.predicted_ms) for p in usable]
    shares = []
    for point in usable:
        given = point.shares or {}
        total = sum(given.get(c, 0.0) for c in CLASSES)
        shares.append([given.get(c, 0.0) / total for c in CLASSES] if total > 0 else None)
    modes = sorted({p.mode for p in usable})
    n_class, n_mode = len(CLASSES), len(modes)
    x = [0.0] * (n_class + n_mode)
    for _ in range(30):
        rows, values = [], []
        for point, r, share in zip(usable, residual, shares, strict=True):
            jacobian = [0.0] * (n_class + n_mode)
            model = 0.0
            if share is not None:
                weights = [s * math.exp(t) for s, t in zip(share, x[:n_class], strict=True)]
                mixed = sum(weights)
                model += math.log(mixed)
                for c in range(n_class):
                    jacobian[c] = weights[c] / mixed
            m = n_class + modes.index(point.mode)
            model += x[m]
            jacobian[m] = 1.0
            rows.append(jacobian)
            values.append(r - model)
        # The ridge as extra rows: sqrt(prior) x (0 - x_j) for each log-scale.
        weight = math.sqrt(prior_points)
        for j in range(n_class + n_mode):
            rows.append([weight if i == j else 0.0 for i in range(n_class + n_mode)])
            values.append(-weight * x[j])
        step = np.linalg.lstsq(np.array(rows), np.array(values), rcond=None)[0].tolist()
        x = [a + b for a, b in zip(x, step, strict=True)]
        if max(abs(v) for v in step) < 1e-9:
            break
    return Correction(class_log_scales=dict(zip(CLASSES, x[:n_class], strict=True)),
                      mode_log_scales=dict(zip(modes, x[n_class:], strict=True)), points=len(usable))


def no_correction() -> Correction:
    """The zero-shot correction, for a target whose calibration holds only other targets' points."""
    return Correction(class_log_scales={}, mode_log_scales={}, points=0)


def log_residuals(points: Sequence[FitPoint], correction: Correction) -> list[float]:
    """What each point's measurement says beyond its target's correction: log(measured / corrected prediction)."""
    return [math.log(p.measured_ms / (p.predicted_ms * correction.factor(p.shares, p.mode))) for p in points]


def transfer_factor(residuals: Sequence[float], weight: float = TRANSFER_WEIGHT) -> float:
    """The multiplier a workload's residuals on other targets give its prediction here (1 without any)."""
    return math.exp(weight * sum(residuals) / len(residuals)) if residuals else 1.0
