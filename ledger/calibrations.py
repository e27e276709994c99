"""A stored calibration read back as the domain's CalibrationSet, and its digest: one reading for the API (which
names the calibration in a prediction's identity) and the worker (which fits it)."""

from __future__ import annotations

from understudy.calibration import CalibrationSet
from ledger.models import Calibration


def calibration_set(row: Calibration) -> CalibrationSet:
    return CalibrationSet.model_validate({"points": row.points["points"], "base_estimator": row.base_estimator})


def calibration_digest(row: Calibration) -> str:
    """The digest of the points, computed as the engine computes it (the one stored at creation is the same)."""
    return calibration_set(row).digest()
